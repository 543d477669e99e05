// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// The xDS type URLs.
const (
	typeCDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	typeEDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	typeLDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
	typeRDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
)

// adsClient is one Gateway proxy's incremental (delta) ADS stream, used
// the same way against both control planes. It follows Envoy's flow: a
// wildcard CDS and LDS subscription, then EDS for every EDS cluster CDS
// names and RDS for every route configuration a listener names; every
// response is ACKed. It keeps each resource's serialized bytes and decodes
// only what the flow needs (new clusters, listeners), so that what it costs
// stays small beside the server's work it measures.
type adsClient struct {
	gateway string
	conn    *grpc.ClientConn
	stream  discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	cancel  context.CancelFunc
	done    chan struct{}

	mu        sync.Mutex
	resources map[string]map[string]*resource // type URL -> name -> resource
	edsNames  map[string]bool
	rdsNames  map[string]bool
	waiters   []*waiter
	updates   chan struct{} // gets a token after every response (capacity 1)
	last      time.Time     // when the last response arrived
	responses int
	err       error
}

// resource is one received resource: its bytes (an Any's value) and its
// version.
type resource struct {
	version string
	raw     []byte
	// decoded caches a decode of raw (the fairness check and completeness
	// checks); nil until asked.
	decoded proto.Message
	// index caches what a check derived from decoded (a route
	// configuration's domains).
	index any
}

// waiter is closed when a response carrying resource name of type typeURL
// arrives.
type waiter struct {
	typeURL, name string
	ch            chan struct{}
}

// proxyNode is the node a proxy of Gateway gateway-namespace/gw sends. It
// carries what each control plane maps a proxy to its Gateway by: our
// GATEWAY_NAMESPACE and GATEWAY_NAME, and Istio's router node id, NAMESPACE
// and the gateway-name label of the Deployment Istio would run. The IP in
// the id is the proxy Pod's (gatewayDeployment), by which Istio finds
// the Gateway's Service.
func proxyNode(gw string, index int) (*corev3.Node, error) {
	md, err := structpb.NewStruct(map[string]any{
		"GATEWAY_NAMESPACE": gatewayNamespace,
		"GATEWAY_NAME":      gw,
		"NAMESPACE":         gatewayNamespace,
		"CLUSTER_ID":        "Kubernetes",
		"ISTIO_VERSION":     "1.30.0",
		"LABELS": map[string]any{
			"gateway.networking.k8s.io/gateway-name": gw,
			"istio.io/gateway-name":                  gw,
		},
	})
	if err != nil {
		return nil, err
	}
	ip := proxyIP(index)
	return &corev3.Node{
		Id:            fmt.Sprintf("router~%s~%s-proxy.%s~%s.svc.%s", ip, gw, gatewayNamespace, gatewayNamespace, clusterDomain),
		Cluster:       gw + "." + gatewayNamespace,
		Metadata:      md,
		UserAgentName: "envoy",
		UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
			Version: &typev3.SemanticVersion{MajorNumber: 1, MinorNumber: 38},
		}},
	}, nil
}

// connectADS opens a delta ADS stream on conn for Gateway gw and starts
// the flow.
func connectADS(conn *grpc.ClientConn, gw string, index int) (*adsClient, error) {
	node, err := proxyNode(gw, index)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	c := &adsClient{
		gateway: gw, conn: conn, stream: stream, cancel: cancel, done: make(chan struct{}),
		resources: map[string]map[string]*resource{typeCDS: {}, typeEDS: {}, typeLDS: {}, typeRDS: {}},
		edsNames:  map[string]bool{}, rdsNames: map[string]bool{},
		updates: make(chan struct{}, 1),
	}
	// Envoy's first requests carry the node; later ones may omit it.
	for _, t := range []string{typeCDS, typeLDS} {
		if err := stream.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: t}); err != nil {
			cancel()
			return nil, err
		}
	}
	go c.run()
	return c, nil
}

// close ends the stream and waits for the receive loop.
func (c *adsClient) close() {
	c.cancel()
	<-c.done
}

func (c *adsClient) run() {
	defer close(c.done)
	for {
		resp, err := c.stream.Recv()
		if err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			c.signal()
			return
		}
		if err := c.handle(resp); err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			c.signal()
			return
		}
	}
}

func (c *adsClient) signal() {
	select {
	case c.updates <- struct{}{}:
	default:
	}
}

// handle stores a response, ACKs it, subscribes to what it names, and wakes
// the waiters for its resources.
func (c *adsClient) handle(resp *discoveryv3.DeltaDiscoveryResponse) error {
	t := resp.GetTypeUrl()
	var subscribe []string
	c.mu.Lock()
	set := c.resources[t]
	if set == nil {
		set = map[string]*resource{}
		c.resources[t] = set
	}
	for _, name := range resp.GetRemovedResources() {
		delete(set, name)
	}
	for _, r := range resp.GetResources() {
		name := r.GetName()
		_, known := set[name]
		set[name] = &resource{version: r.GetVersion(), raw: r.GetResource().GetValue()}
		switch t {
		case typeCDS:
			if known {
				continue // a cluster's EDS name does not change with its version here
			}
			cl := &clusterv3.Cluster{}
			if err := proto.Unmarshal(r.GetResource().GetValue(), cl); err != nil {
				c.mu.Unlock()
				return fmt.Errorf("cluster %s: %v", name, err)
			}
			if cl.GetType() == clusterv3.Cluster_EDS {
				eds := cl.GetEdsClusterConfig().GetServiceName()
				if eds == "" {
					eds = cl.GetName()
				}
				if !c.edsNames[eds] {
					c.edsNames[eds] = true
					subscribe = append(subscribe, eds)
				}
			}
		case typeLDS:
			names, err := routeNames(r.GetResource().GetValue())
			if err != nil {
				c.mu.Unlock()
				return fmt.Errorf("listener %s: %v", name, err)
			}
			for _, n := range names {
				if !c.rdsNames[n] {
					c.rdsNames[n] = true
					subscribe = append(subscribe, n)
				}
			}
		}
	}
	c.last = time.Now()
	c.responses++
	var woken []*waiter
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.typeURL == t && carries(resp, w.name) {
			woken = append(woken, w)
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
	c.mu.Unlock()
	for _, w := range woken {
		close(w.ch)
	}
	c.signal()
	if err := c.stream.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: t, ResponseNonce: resp.GetNonce()}); err != nil {
		return err
	}
	if len(subscribe) > 0 {
		sub := typeEDS
		if t == typeLDS {
			sub = typeRDS
		}
		return c.stream.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: sub, ResourceNamesSubscribe: subscribe})
	}
	return nil
}

func carries(resp *discoveryv3.DeltaDiscoveryResponse, name string) bool {
	for _, r := range resp.GetResources() {
		if r.GetName() == name {
			return true
		}
	}
	return false
}

// routeNames returns the RDS names of a listener's HTTP connection managers.
func routeNames(raw []byte) ([]string, error) {
	l := &listenerv3.Listener{}
	if err := proto.Unmarshal(raw, l); err != nil {
		return nil, err
	}
	var out []string
	for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
		for _, f := range fc.GetFilters() {
			if f.GetTypedConfig().GetTypeUrl() != "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" {
				continue
			}
			hcm := &hcmv3.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
				return nil, err
			}
			if n := hcm.GetRds().GetRouteConfigName(); n != "" {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// expect returns a channel closed when the next response of typeURL
// carrying name arrives. Register it before making the change.
func (c *adsClient) expect(typeURL, name string) <-chan struct{} {
	w := &waiter{typeURL: typeURL, name: name, ch: make(chan struct{})}
	c.mu.Lock()
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	return w.ch
}

// wait blocks until the stream fails or ch closes, at most timeout.
func (c *adsClient) wait(ch <-chan struct{}, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-ch:
			return nil
		case <-c.done:
			return c.failure()
		case <-t.C:
			return fmt.Errorf("gateway %s: nothing after %v", c.gateway, timeout)
		}
	}
}

func (c *adsClient) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return errors.New("stream closed")
	}
	return fmt.Errorf("gateway %s: %w", c.gateway, c.err)
}

// waitUntil calls check (holding the client's lock) after every response
// until it returns nil, the stream fails or timeout passes; the error
// says what check last found missing.
func (c *adsClient) waitUntil(timeout time.Duration, check func(*adsClient) error) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		err, failed := check(c), c.err
		c.mu.Unlock()
		if err == nil {
			return nil
		}
		if failed != nil {
			return fmt.Errorf("gateway %s: stream: %v (and %v)", c.gateway, failed, err)
		}
		select {
		case <-c.updates:
		case <-deadline.C:
			return fmt.Errorf("gateway %s: after %v: %v", c.gateway, timeout, err)
		}
	}
}

// quietSince reports when the last response arrived and how many have.
func (c *adsClient) quietSince() (time.Time, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.responses
}

// get returns resource name of typeURL decoded into m's type (cached), or
// nil when the client has none. Callers hold c.mu.
func (c *adsClient) get(typeURL, name string, m func() proto.Message) (proto.Message, error) {
	r := c.resources[typeURL][name]
	if r == nil {
		return nil, nil
	}
	if r.decoded == nil {
		d := m()
		if err := proto.Unmarshal(r.raw, d); err != nil {
			return nil, fmt.Errorf("%s %s: %v", typeURL, name, err)
		}
		r.decoded = d
	}
	return r.decoded, nil
}

// raw returns the bytes of resource name of typeURL.
func (c *adsClient) raw(typeURL, name string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.resources[typeURL][name]; r != nil {
		return r.raw
	}
	return nil
}
