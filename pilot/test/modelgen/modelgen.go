// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package modelgen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

const (
	numRoutes   = 12
	numServices = 4
	numPools    = 4
	ns          = "gen"
)

var (
	routeHosts    = []string{"a.example.com", "x.example.com", "*.example.com", "foo.b.example.com", "c.test"}
	listenerHosts = []string{"", "", "a.example.com", "*.example.com", "*.b.example.com"}
	paths         = []string{"/", "/v1", "/v1/models", "/x"}
)

// World is the generator's state.
type World struct {
	rnd      *rand.Rand
	services []*model.ServiceBackend
	// mirrors are the Services as mirror targets (port 8000), with the
	// same TLS.
	mirrors   []*model.ServiceBackend
	pools     []*model.PoolBackend
	endpoints map[string][]model.Endpoint
	listeners []model.Listener // without routes
	routes    []*routeSrc
	// split: a route attached to several listeners gets its own
	// *model.Route per listener (a hand-built model may do so).
	split bool
}

// routeSrc is one route as its author wrote it, and its current model.
type routeSrc struct {
	name     string
	grpc     bool
	hosts    []string
	rules    []ruleSrc
	attached []int // listener indexes
	created  time.Time
	model    *model.Route
}

type ruleSrc struct {
	// http and grpc are the rule as written, built once per version of
	// the rule: a Service or pool change keeps them, as the controller
	// keeps a route's spec.
	http     *gwv1.HTTPRouteRule
	grpc     *gwv1.GRPCRouteRule
	path     string
	exact    bool
	backends []backendSrc
	mirror   int // Service index + 1, 0 for none
	header   bool
}

type backendSrc struct {
	service int // index, -1 for a pool
	pool    int
	weight  int32
	invalid bool
}

// New is a world from seed: two or three listeners, numRoutes routes,
// Services and pools.
func New(seed uint64) *World {
	w := &World{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), endpoints: map[string][]model.Endpoint{},
		services: make([]*model.ServiceBackend, numServices), mirrors: make([]*model.ServiceBackend, numServices)}
	for i := range numServices {
		w.setService(i)
	}
	for i := range numPools {
		w.pools = append(w.pools, w.newPool(i))
	}
	w.listeners = []model.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}
	for range 1 + w.rnd.IntN(2) {
		w.addListener()
	}
	for i := range numRoutes {
		r := &routeSrc{name: fmt.Sprintf("r%02d", i), grpc: w.rnd.IntN(5) == 0,
			created: time.Date(2026, 1, 1, 0, 0, w.rnd.IntN(3), 0, time.UTC)}
		w.randomizeRoute(r)
		w.routes = append(w.routes, r)
		w.materialize(r)
	}
	return w
}

func (w *World) addListener() {
	i := len(w.listeners)
	l := model.Listener{Name: fmt.Sprintf("l%d", i), Hostname: listenerHosts[w.rnd.IntN(len(listenerHosts))]}
	switch w.rnd.IntN(3) {
	case 0:
		l.Port, l.Protocol = 80, gwv1.HTTPProtocolType
	case 1:
		l.Port, l.Protocol = 8080, gwv1.HTTPProtocolType
	default:
		l.Port, l.Protocol = 443, gwv1.HTTPSProtocolType
		l.TLS = &model.ListenerTLS{CertificateRefs: []string{ns + "/cert"}}
	}
	for _, o := range w.listeners {
		if o.Port == l.Port && o.Hostname == l.Hostname {
			return // the controller would mark it Conflicted
		}
	}
	w.listeners = append(w.listeners, l)
}

// setService gives Service i a new random port, protocol and TLS (and,
// for half of them, NegotiateHTTP with TLS), as a
// backend and as a mirror target.
func (w *World) setService(i int) {
	s := &model.ServiceBackend{Host: fmt.Sprintf("svc-%d.%s.svc.cluster.local", i, ns), Port: int32(8000 + w.rnd.IntN(2)),
		HTTP2: w.rnd.IntN(3) == 0}
	s.TLS = w.randomTLS(s.Host)
	// Half the Services with TLS and no HTTP/2 declare no protocol: their
	// HTTP version is negotiated by ALPN (auto_config). Derived, not
	// drawn, so the random sequence of every other choice stays as it was.
	s.NegotiateHTTP = !s.HTTP2 && s.TLS != nil && i%2 == 0
	m := *s
	m.Port = 8000
	w.services[i], w.mirrors[i] = s, &m
}

// randomTLS is no TLS, TLS with an inline CA, or TLS whose CA comes from a
// credentialName that this Gateway's namespace has or lacks (a Gateway
// lacking it answers 500 for the upstream).
func (w *World) randomTLS(host string) *model.EPPTLS {
	switch w.rnd.IntN(6) {
	case 0:
		return &model.EPPTLS{Host: host, CACertificates: []byte("ca"), SubjectAltNames: []string{fmt.Sprintf("n%d", w.rnd.IntN(2))}}
	case 1:
		return &model.EPPTLS{Host: host, InsecureSkipVerify: true}
	case 2:
		t := &model.EPPTLS{Host: host, CredentialName: "cred", CredentialCAs: map[string]model.CredentialCA{"other": {PEM: []byte("x")}}}
		if w.rnd.IntN(2) == 0 {
			t.CredentialCAs[ns] = model.CredentialCA{PEM: []byte("ca-from-secret")}
		} else {
			t.CredentialCAs[ns] = model.CredentialCA{Problem: "the Secret is missing"}
		}
		return t
	}
	return nil
}

func (w *World) newPool(i int) *model.PoolBackend {
	name := fmt.Sprintf("pool-%d", i)
	modes := []inferencev1.EndpointPickerFailureMode{inferencev1.EndpointPickerFailOpen, inferencev1.EndpointPickerFailClose}
	p := &model.PoolBackend{Namespace: ns, Name: name, ShadowService: name + "-ip", Host: name + "-ip." + ns + ".svc.cluster.local",
		Port: 54321, TargetPorts: []int32{8000}, AppProtocol: inferencev1.AppProtocolHTTP,
		EPP: &model.EPPBackend{Service: name + "-epp", Host: name + "-epp." + ns + ".svc.cluster.local",
			Port: int32(9002 + w.rnd.IntN(2)), AppProtocol: "http2", FailureMode: modes[w.rnd.IntN(2)]}}
	p.EPP.TLS = w.randomTLS(p.EPP.Host)
	if w.rnd.IntN(3) == 0 {
		p.AppProtocol = inferencev1.AppProtocolH2C
	}
	if w.rnd.IntN(8) == 0 {
		p.EPP = nil
	}
	return p
}

func (w *World) randomizeRoute(r *routeSrc) {
	r.hosts = nil
	for _, h := range routeHosts {
		if w.rnd.IntN(4) == 0 {
			r.hosts = append(r.hosts, h)
		}
	}
	r.rules = nil
	for range 1 + w.rnd.IntN(2) {
		r.rules = append(r.rules, w.randomRule())
	}
	r.attached = nil
	for i := range w.listeners {
		if w.rnd.IntN(2) == 0 {
			r.attached = append(r.attached, i)
		}
	}
}

func (w *World) randomRule() ruleSrc {
	ru := ruleSrc{path: paths[w.rnd.IntN(len(paths))], exact: w.rnd.IntN(4) == 0, header: w.rnd.IntN(4) == 0}
	if w.rnd.IntN(5) == 0 {
		ru.mirror = 1 + w.rnd.IntN(numServices)
	}
	for range 1 + w.rnd.IntN(2) {
		b := backendSrc{service: -1, weight: int32(w.rnd.IntN(3)), invalid: w.rnd.IntN(10) == 0}
		if w.rnd.IntN(2) == 0 {
			b.service = w.rnd.IntN(numServices)
		} else {
			b.pool = w.rnd.IntN(numPools)
		}
		ru.backends = append(ru.backends, b)
	}
	return ru
}

// materialize builds r's model from its source and the current Services
// and pools.
func (w *World) materialize(r *routeSrc) {
	m := &model.Route{Kind: "HTTPRoute", Namespace: ns, Name: r.name, CreationTimestamp: r.created, Hostnames: slices.Clone(r.hosts)}
	if r.grpc {
		m.Kind = "GRPCRoute"
	}
	for i := range r.rules {
		ru := &r.rules[i]
		mr := model.Rule{Index: i}
		switch {
		case r.grpc && ru.grpc == nil:
			ru.grpc = &gwv1.GRPCRouteRule{}
		case !r.grpc && ru.http == nil:
			t := gwv1.PathMatchPathPrefix
			if ru.exact {
				t = gwv1.PathMatchExact
			}
			path := ru.path
			rule := &gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &t, Value: &path}}}}
			if ru.header {
				rule.Filters = append(rule.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestHeaderModifier,
					RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "x-gen", Value: r.name}}}})
			}
			if ru.mirror > 0 {
				port := gwv1.PortNumber(8000)
				rule.Filters = append(rule.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror,
					RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{
						Name: gwv1.ObjectName(fmt.Sprintf("svc-%d", ru.mirror-1)), Port: &port}}})
			}
			ru.http = rule
		}
		mr.HTTP, mr.GRPC = ru.http, ru.grpc
		if ru.mirror > 0 && !r.grpc {
			sb := w.mirrors[ru.mirror-1]
			mr.Mirrors = map[string]*model.ServiceBackend{fmt.Sprintf("outbound|%d||%s", sb.Port, sb.Host): sb}
		}
		for _, b := range ru.backends {
			mb := model.Backend{Weight: b.weight}
			switch {
			case b.invalid:
				mb.Invalid = "backend not found"
			case b.service >= 0:
				mb.Service = w.services[b.service]
			default:
				mb.Pool = w.pools[b.pool]
			}
			mr.Backends = append(mr.Backends, mb)
		}
		m.Rules = append(m.Rules, mr)
	}
	r.model = m
}

// Step applies one random change and says what it was.
func (w *World) Step() string {
	switch n := w.rnd.IntN(100); {
	case n < 35:
		r := w.routes[w.rnd.IntN(len(w.routes))]
		switch w.rnd.IntN(4) {
		case 0:
			r.hosts = nil
			for _, h := range routeHosts {
				if w.rnd.IntN(4) == 0 {
					r.hosts = append(r.hosts, h)
				}
			}
		case 1:
			ru := &r.rules[w.rnd.IntN(len(r.rules))]
			ru.path, ru.exact = paths[w.rnd.IntN(len(paths))], w.rnd.IntN(4) == 0
			ru.http = nil
		case 2:
			r.rules[w.rnd.IntN(len(r.rules))] = w.randomRule()
		default:
			if len(r.rules) > 1 {
				r.rules = r.rules[:1]
			} else {
				r.rules = append(r.rules, w.randomRule())
			}
		}
		w.materialize(r)
		return "route " + r.name
	case n < 45:
		r := w.routes[w.rnd.IntN(len(w.routes))]
		r.attached = nil
		for i := range w.listeners {
			if w.rnd.IntN(2) == 0 {
				r.attached = append(r.attached, i)
			}
		}
		return "attachment of " + r.name
	case n < 60:
		i := w.rnd.IntN(numServices)
		w.setService(i)
		w.rematerializeIf(func(ru ruleSrc) bool {
			return ru.mirror == i+1 || slices.ContainsFunc(ru.backends, func(b backendSrc) bool { return b.service == i })
		})
		return fmt.Sprintf("service %d", i)
	case n < 72:
		i := w.rnd.IntN(numPools)
		w.pools[i] = w.newPool(i)
		w.rematerializeIf(func(ru ruleSrc) bool {
			return slices.ContainsFunc(ru.backends, func(b backendSrc) bool { return b.service < 0 && b.pool == i })
		})
		return fmt.Sprintf("pool %d", i)
	case n < 80:
		// The EPP's TLS changes (a policy, rule, ConfigMap or Secret): the
		// controller gives the pool a new value, and every route using
		// it a new model.
		i := w.rnd.IntN(numPools)
		if w.pools[i].EPP == nil {
			return "EPP TLS of a pool without EPP"
		}
		p := *w.pools[i]
		epp := *p.EPP
		epp.TLS = w.randomTLS(epp.Host)
		p.EPP = &epp
		w.pools[i] = &p
		w.rematerializeIf(func(ru ruleSrc) bool {
			return slices.ContainsFunc(ru.backends, func(b backendSrc) bool { return b.service < 0 && b.pool == i })
		})
		return "EPP TLS of " + p.Name
	case n < 88:
		p := w.pools[w.rnd.IntN(numPools)]
		c := fmt.Sprintf("outbound|%d||%s", p.Port, p.Host)
		var eps []model.Endpoint
		for j := range w.rnd.IntN(4) {
			eps = append(eps, model.Endpoint{Address: fmt.Sprintf("10.0.%d.%d", w.rnd.IntN(4), j+1), Port: 8000})
		}
		w.endpoints[c] = eps
		return "endpoints of " + c
	case n < 94:
		w.Rebuild()
		return "rebuild"
	case n < 97:
		w.split = !w.split
		return "split"
	default:
		if len(w.listeners) < 4 && w.rnd.IntN(2) == 0 {
			w.addListener()
			return "listener added"
		}
		if i := w.rnd.IntN(len(w.listeners)); i > 0 {
			w.listeners[i].Hostname = listenerHosts[w.rnd.IntN(len(listenerHosts))]
			for j, o := range w.listeners {
				if j != i && o.Port == w.listeners[i].Port && o.Hostname == w.listeners[i].Hostname {
					w.listeners[i].Hostname = fmt.Sprintf("l%d.example.com", i)
				}
			}
		}
		return "listener hostname"
	}
}

// rematerializeIf builds again the models of the routes with a rule for
// which uses is true.
func (w *World) rematerializeIf(uses func(ruleSrc) bool) {
	for _, r := range w.routes {
		if slices.ContainsFunc(r.rules, uses) {
			w.materialize(r)
		}
	}
}

// Rebuild gives every route a new *model.Route holding the same rule,
// Service and pool values, as TranslatorGateway builds them (and as the
// controller did on every Gateway recomputation before its routeModel
// collection): the translator must find them unchanged.
func (w *World) Rebuild() {
	for _, r := range w.routes {
		c := *r.model
		c.Rules = slices.Clone(c.Rules)
		for i := range c.Rules {
			c.Rules[i].Backends = slices.Clone(c.Rules[i].Backends)
		}
		r.model = &c
	}
}

// Gateway is the current model (new listener slices; the routes' models
// are shared with earlier calls unless they changed).
func (w *World) Gateway() *model.Gateway {
	gw := &model.Gateway{Namespace: ns, Name: "gw"}
	for i, l := range w.listeners {
		var routes []*model.Route
		for _, r := range w.routes {
			if slices.Contains(r.attached, i) {
				m := r.model
				if w.split && i > 0 {
					c := *m
					m = &c
				}
				routes = append(routes, m)
			}
		}
		sort.Slice(routes, func(a, b int) bool {
			if routes[a].Kind != routes[b].Kind {
				return routes[a].Kind < routes[b].Kind
			}
			return routes[a].Name < routes[b].Name
		})
		l.Routes = routes
		gw.Listeners = append(gw.Listeners, l)
	}
	return gw
}

// Endpoints are the current endpoints per cluster name.
func (w *World) Endpoints() map[string][]model.Endpoint { return w.endpoints }
