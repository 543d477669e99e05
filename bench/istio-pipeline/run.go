// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Run is one side's control plane over one generated cluster, with one ADS
// client per Gateway once Cold has run.
type Run struct {
	Side    Side
	In      *Inputs
	inst    Instance
	conns   []*grpc.ClientConn
	clients map[string]*adsClient // by Gateway name
	// ready and routeOps hold the state the changes toggle.
	ready    map[string]bool // pool -> endpoint 0 ready
	routeOps int
}

// Prepare builds the side's fake API server over in (not timed).
func Prepare(side Side, in *Inputs) (*Run, error) {
	inst, err := side.Prepare(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", side.Name, err)
	}
	return &Run{Side: side, In: in, inst: inst, clients: map[string]*adsClient{}, ready: map[string]bool{}}, nil
}

// Cold starts the control plane, connects one proxy per Gateway and waits
// until every proxy holds its Gateway's complete configuration: the
// listener with the ext_proc filter, the route configuration with a
// virtual host per pool of the Gateway, each pool's cluster and the EPP's,
// and their assignments with every ready endpoint.
func (r *Run) Cold(timeout time.Duration) error {
	if err := r.Start(); err != nil {
		return err
	}
	return r.WaitComplete(timeout)
}

// Start starts the control plane and connects one proxy per Gateway.
func (r *Run) Start() error {
	if err := r.inst.Start(); err != nil {
		return fmt.Errorf("%s: start: %v", r.Side.Name, err)
	}
	for i, gw := range r.In.GatewayNames {
		conn, err := r.inst.Dial()
		if err != nil {
			return err
		}
		r.conns = append(r.conns, conn)
		c, err := connectADS(conn, gw, i)
		if err != nil {
			return fmt.Errorf("%s: gateway %s: %v", r.Side.Name, gw, err)
		}
		r.clients[gw] = c
	}
	return nil
}

// WaitComplete waits until every proxy holds its Gateway's complete
// configuration (Cold), at most timeout in all.
func (r *Run) WaitComplete(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, gw := range r.In.GatewayNames {
		if err := r.clients[gw].waitUntil(time.Until(deadline), completeCheck(r.In, gw)); err != nil {
			return fmt.Errorf("%s: %v", r.Side.Name, err)
		}
	}
	return nil
}

// Close stops the clients and the control plane.
func (r *Run) Close() {
	for _, c := range r.clients {
		c.close()
	}
	for _, c := range r.conns {
		c.Close()
	}
	r.inst.Close()
	r.clients, r.conns = nil, nil
}

// completeCheck returns what Gateway gw's proxy still lacks, or nil.
// Callers hold the client's lock.
func completeCheck(in *Inputs, gw string) func(c *adsClient) error {
	pools := in.PoolsOf(gw)
	epp := EPPCluster()
	return func(c *adsClient) error {
		if len(c.resources[typeLDS]) == 0 {
			return errors.New("no listener")
		}
		if err := c.listenerHasExtProc(); err != nil {
			return err
		}
		for _, p := range pools {
			if c.resources[typeCDS][p.Cluster] == nil {
				return fmt.Errorf("no cluster %s", p.Cluster)
			}
		}
		if c.resources[typeCDS][epp] == nil {
			return fmt.Errorf("no cluster %s", epp)
		}
		for _, p := range pools {
			if err := c.healthyEndpoints(p.Cluster, in.PodsPerPool); err != nil {
				return err
			}
		}
		if err := c.healthyEndpoints(epp, 1); err != nil {
			return err
		}
		domains, err := c.domains(routeConfig)
		if err != nil {
			return err
		}
		for _, p := range pools {
			if !domains[p.Host] {
				return fmt.Errorf("route configuration %s: no virtual host for %s", routeConfig, p.Host)
			}
		}
		return nil
	}
}

// listenerHasExtProc checks that a listener's HTTP filters hold the
// ext_proc filter the routes' ExtProcPerRoute overrides configure.
// Callers hold the client's lock.
func (c *adsClient) listenerHasExtProc() error {
	for name, r := range c.resources[typeLDS] {
		if has, ok := r.index.(bool); ok {
			if has {
				return nil
			}
			continue
		}
		m, err := c.get(typeLDS, name, func() proto.Message { return &listenerv3.Listener{} })
		if err != nil {
			return err
		}
		has, err := hasExtProc(m.(*listenerv3.Listener))
		if err != nil {
			return err
		}
		r.index = has
		if has {
			return nil
		}
	}
	return errors.New("no listener with the ext_proc filter")
}

// healthyEndpoints checks that cluster's assignment has want endpoints a
// proxy would send traffic to.
func (c *adsClient) healthyEndpoints(cluster string, want int) error {
	m, err := c.get(typeEDS, cluster, func() proto.Message { return &endpointv3.ClusterLoadAssignment{} })
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("no assignment for %s", cluster)
	}
	if n := len(healthy(m.(*endpointv3.ClusterLoadAssignment))); n != want {
		return fmt.Errorf("assignment %s: %d endpoints, want %d", cluster, n, want)
	}
	return nil
}

// healthy returns the sorted address:port of the endpoints Envoy would
// route to (health UNKNOWN or HEALTHY).
func healthy(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			if s := e.GetHealthStatus().String(); s != "UNKNOWN" && s != "HEALTHY" {
				continue
			}
			a := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, fmt.Sprintf("%s:%d", a.GetAddress(), a.GetPortValue()))
		}
	}
	slices.Sort(out)
	return out
}

// domains returns the set of domains of a route configuration (ports and
// ":*" cut), cached with the decoded resource.
func (c *adsClient) domains(name string) (map[string]bool, error) {
	r := c.resources[typeRDS][name]
	if r == nil {
		return nil, fmt.Errorf("no route configuration %s", name)
	}
	if d, ok := r.index.(map[string]bool); ok {
		return d, nil
	}
	m, err := c.get(typeRDS, name, func() proto.Message { return &routev3.RouteConfiguration{} })
	if err != nil {
		return nil, err
	}
	d := map[string]bool{}
	for _, vh := range m.(*routev3.RouteConfiguration).GetVirtualHosts() {
		for _, dom := range vh.GetDomains() {
			d[hostOf(dom)] = true
		}
	}
	r.index = d
	return d, nil
}

// hostOf cuts a port or ":*" from a virtual host domain.
func hostOf(domain string) string {
	if i := strings.LastIndexByte(domain, ':'); i >= 0 && !strings.Contains(domain[i:], "]") {
		return domain[:i]
	}
	return domain
}

// Settle waits until the control plane is idle: no xDS response for quiet,
// nothing pending it knows of, and the process using under 10% of a core
// over that window; at most max.
func (r *Run) Settle(quiet, max time.Duration) error {
	deadline := time.Now().Add(max)
	step := quiet / 5
	cpu0, t0 := cpuTime(), time.Now()
	for {
		time.Sleep(step)
		now, cpu := time.Now(), cpuTime()
		last := time.Time{}
		for _, c := range r.clients {
			if l, _ := c.quietSince(); l.After(last) {
				last = l
			}
		}
		if r.inst.Busy() || now.Sub(last) < quiet {
			cpu0, t0 = cpu, now
		} else if now.Sub(t0) >= quiet {
			if float64(cpu-cpu0) <= 0.1*float64(now.Sub(t0)) {
				return nil
			}
			cpu0, t0 = cpu, now
		}
		if now.After(deadline) {
			return fmt.Errorf("%s: not idle after %v", r.Side.Name, max)
		}
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// LiveHeap is the heap in use after two collections.
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Change is one prepared change: Apply writes it; Arrived closes when the
// proxy of its Gateway has received the resource it changes; Verify checks
// afterwards that what arrived is the change.
type Change struct {
	Apply   func() error
	Arrived <-chan struct{}
	Wait    func(<-chan struct{}, time.Duration) error
	Verify  func() error
}

// poolFor picks the pool of change i: a stride through the pools, so that
// consecutive changes hit different pools and, with several Gateways,
// different Gateways.
func (r *Run) poolFor(i int) Pool {
	return r.In.Pool[(i*7919)%len(r.In.Pool)]
}

// RouteChange prepares change i to an HTTPRoute: its rule gets a request
// header with a value no earlier change used, which reaches the route of
// the pool's virtual host in the Gateway's route configuration.
func (r *Run) RouteChange(i int) Change {
	p := r.poolFor(i)
	r.routeOps++
	marker := fmt.Sprintf("bench-op-%08d", r.routeOps)
	route := p.Route.DeepCopy()
	route.Spec.Rules[0].Filters = []gwv1.HTTPRouteFilter{{
		Type: gwv1.HTTPRouteFilterRequestHeaderModifier,
		RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
			Set: []gwv1.HTTPHeader{{Name: "x-bench-op", Value: marker}},
		},
	}}
	c := r.clients[p.Gateway]
	arrived := c.expect(typeRDS, routeConfig)
	return Change{
		Apply:   func() error { return r.inst.UpdateHTTPRoute(route) },
		Arrived: arrived,
		Wait:    c.wait,
		Verify: func() error {
			if raw := c.raw(typeRDS, routeConfig); !strings.Contains(string(raw), marker) {
				return fmt.Errorf("%s: route configuration %s of %s arrived without %s (HTTPRoute %s)", r.Side.Name, routeConfig, p.Gateway, marker, p.Name)
			}
			return nil
		},
	}
}

// EndpointChange prepares change i to a pool's endpoints: the first
// endpoint of its EndpointSlice turns not ready, or ready again, as
// kube-controller-manager writes it when the Pod's readiness changes.
func (r *Run) EndpointChange(i int) Change {
	p := r.poolFor(i)
	nowReady := r.ready[p.Name]
	if _, seen := r.ready[p.Name]; !seen {
		nowReady = true
	}
	ready := !nowReady
	r.ready[p.Name] = ready
	s := p.Slice.DeepCopy()
	s.Endpoints[0].Conditions = discoveryv1.EndpointConditions{
		Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false),
	}
	want := r.In.PodsPerPool
	if !ready {
		want--
	}
	c := r.clients[p.Gateway]
	arrived := c.expect(typeEDS, p.Cluster)
	return Change{
		Apply:   func() error { return r.inst.UpdateEndpointSlice(s) },
		Arrived: arrived,
		Wait:    c.wait,
		Verify: func() error {
			c.mu.Lock()
			defer c.mu.Unlock()
			if err := c.healthyEndpoints(p.Cluster, want); err != nil {
				return fmt.Errorf("%s: %v", r.Side.Name, err)
			}
			return nil
		},
	}
}
