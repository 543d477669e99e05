// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// Translator translates one Gateway again and again, keeping what a change
// leaves equal: a route change recomputes the Envoy routes of that route,
// the virtual hosts of the hostnames it served before and serves now, and
// the clusters it referred to before and refers to now. Every resource and
// virtual host the change does not touch keeps its message (the same
// pointer), so the push path can keep its validation result and
// serialization (architecture/xds.md, "Incremental translation").
//
// Build's output is byte for byte what BuildListeners,
// BuildRouteConfigurations and BuildClusters return for the same input
// (TestTranslatorMatchesFullTranslation and FuzzTranslator check it over
// random change sequences).
//
// What "a route did not change" means (sameRoute): the same *model.Route,
// or one with equal scalar fields whose rules hold the same rule,
// Service, pool, mirror and filter values (pointers). The model is immutable once
// built, so equal pointers mean equal content; equal content behind new
// pointers is translated again, which gives equal output.
//
// A Translator is safe for concurrent use (Build calls are serialized).
type Translator struct {
	mu     sync.Mutex
	opts   Options
	packed *packedClusterConfig

	// listeners is the last listener translation and lisGW its input (the
	// Gateway without routes).
	lisGW     *model.Gateway
	lisAuthz  []*model.ExternalAuth // its ext_authz filters (gatewayExtAuthz)
	listeners []*listenerv3.Listener

	rcs    map[string]*rcState
	routes []*routev3.RouteConfiguration

	cl *clusterState
}

// NewTranslator returns a Translator with the given knobs.
func NewTranslator(opts Options) *Translator {
	return &Translator{opts: opts.WithDefaults(), rcs: map[string]*rcState{}}
}

// Build translates gw (listeners, route configurations, clusters; not
// endpoints, and no Validate). The error is the first of the listeners',
// the routes' and the clusters' translation, prefixed "listeners: ",
// "routes: " or "clusters: ", exactly as the full builders would report
// it; after an error the next Build starts from scratch.
func (t *Translator) Build(gw *model.Gateway, in Inputs) (Resources, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	res, err := t.build(gw, in)
	if err != nil {
		t.lisGW, t.listeners, t.rcs, t.routes, t.cl = nil, nil, map[string]*rcState{}, nil, nil
		return Resources{}, err
	}
	return res, nil
}

func (t *Translator) build(gw *model.Gateway, in Inputs) (Resources, error) {
	var res Resources
	var err error
	// The Gateway's ext_authz filters, read once per Build: listeners and
	// route configurations both depend on them, and finding them visits
	// every route.
	authz := gatewayExtAuthz(gw)
	if res.Listeners, err = t.buildListeners(gw, authz); err != nil {
		return res, fmt.Errorf("listeners: %w", err)
	}
	if res.Routes, err = t.buildRoutes(gw, authz); err != nil {
		return res, fmt.Errorf("routes: %w", err)
	}
	if res.Clusters, err = t.buildClusters(gw, in); err != nil {
		return res, fmt.Errorf("clusters: %w", err)
	}
	return res, nil
}

// buildListeners reuses the last listeners when everything they depend on
// (the Gateway but its HTTP and HTTPS listeners' routes, and authz, its
// ext_authz filters: gatewayExtAuthz) is equal.
func (t *Translator) buildListeners(gw *model.Gateway, authz []*model.ExternalAuth) ([]*listenerv3.Listener, error) {
	if t.lisGW != nil && sameListenerInputs(t.lisGW, gw) && sameExtAuthz(t.lisAuthz, authz) {
		return t.listeners, nil
	}
	ls, err := BuildListeners(gw, t.opts)
	if err != nil {
		return nil, err
	}
	t.lisGW, t.listeners, t.lisAuthz = withoutRoutes(gw), ls, authz
	return ls, nil
}

// withoutRoutes is a copy of gw's fields listeners depend on: everything
// but the routes of HTTP and HTTPS listeners (a TLS or TCP listener's
// routes are its filter chains).
func withoutRoutes(gw *model.Gateway) *model.Gateway {
	out := *gw
	out.Listeners = make([]model.Listener, len(gw.Listeners))
	for i, l := range gw.Listeners {
		if !model.StreamProtocol(l.Protocol) {
			l.Routes = nil
		}
		out.Listeners[i] = l
	}
	return &out
}

func sameListenerInputs(a, b *model.Gateway) bool {
	if a.Namespace != b.Namespace || a.Name != b.Name || a.EPPBodyMode != b.EPPBodyMode ||
		a.ClassParametersError != b.ClassParametersError || a.BackendClientCertificate != b.BackendClientCertificate ||
		len(a.Listeners) != len(b.Listeners) {
		return false
	}
	for i := range a.Listeners {
		x, y := a.Listeners[i], b.Listeners[i]
		if x.Name != y.Name || x.Port != y.Port || x.Protocol != y.Protocol || x.Hostname != y.Hostname ||
			(x.TLS != y.TLS && !reflect.DeepEqual(x.TLS, y.TLS)) || !reflect.DeepEqual(x.Filters, y.Filters) || x.FilterError != y.FilterError {
			return false
		}
		if model.StreamProtocol(x.Protocol) && !slices.EqualFunc(x.Routes, y.Routes, sameRoute) {
			return false
		}
	}
	return true
}

// sameRoute reports whether a and b translate alike: the same route, or
// equal scalars and the same (immutable) rule, backend and filter values.
func sameRoute(a, b *model.Route) bool {
	if a == b {
		return true
	}
	if a.Kind != b.Kind || a.Namespace != b.Namespace || a.Name != b.Name ||
		!a.CreationTimestamp.Equal(b.CreationTimestamp) || !slices.Equal(a.Hostnames, b.Hostnames) ||
		len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Rules {
		x, y := &a.Rules[i], &b.Rules[i]
		if x.Index != y.Index || x.HTTP != y.HTTP || x.GRPC != y.GRPC || x.TLS != y.TLS || x.TCP != y.TCP ||
			len(x.Backends) != len(y.Backends) || !maps.Equal(x.Mirrors, y.Mirrors) ||
			!slices.Equal(x.ExternalAuth, y.ExternalAuth) {
			return false
		}
		for j := range x.Backends {
			p, q := &x.Backends[j], &y.Backends[j]
			if p.Weight != q.Weight || p.Service != q.Service || p.Pool != q.Pool || p.Invalid != q.Invalid ||
				!sameSlice(p.HTTPFilters, q.HTTPFilters) || !sameSlice(p.GRPCFilters, q.GRPCFilters) {
				return false
			}
		}
	}
	return true
}

// sameSlice reports whether a and b are the same slice (or both empty).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// routeCmp orders routes as model.Listener.Routes are (model.CompareRoutes).
func routeCmp(a, b *model.Route) int { return model.CompareRoutes(a, b) }

// --- route configurations ---

// rcState is what the Translator keeps of one route configuration.
type rcState struct {
	// sig is the configuration's inputs other than routes: port, TLS,
	// the Gateway namespace (credentialName CAs),
	// chain, its port's listeners' names and hostnames, the body mode.
	sig string
	// lists are, per listener of the port (only the chain's on an HTTPS
	// port), its routes as last translated.
	lists []routeList[rcRoute]
	// vhosts are the virtual hosts routes serve, by hostname; sortedVH
	// their messages in hostname order (vhlist.go); wild those that are
	// "*" or wildcards.
	vhosts   map[string]*vhState
	sortedVH []*routev3.VirtualHost
	wild     map[string]bool
	// empties are the routeless virtual hosts of listener hostnames
	// (last built, by hostname), emptyNames those in the last output.
	empties    map[string]*routev3.VirtualHost
	emptyNames []string
	misdir     *routev3.VirtualHost
	rc         *routev3.RouteConfiguration
}

// rcRoute is one attached route's translation on one listener: its Envoy
// routes and the hostnames it serves through that listener.
type rcRoute struct {
	r       *model.Route
	entries []routeEntry
	hosts   []string
}

// vhState is one virtual host: its routes' entries, ordered as the full
// translation appends them (listener, then route order), and its message.
type vhState struct {
	members []vhMember
	vh      *routev3.VirtualHost
}

type vhMember struct {
	li      int
	r       *model.Route
	entries []routeEntry
}

func memberCmp(a vhMember, li int, r *model.Route) int {
	if c := cmp.Compare(a.li, li); c != 0 {
		return c
	}
	return routeCmp(a.r, r)
}

func rcSig(g portGroup, chain int, body model.EPPBodyMode, namespace string) string {
	b := []byte(fmt.Sprintf("%d|%t|%d|%s|%q", g.port, g.tls, chain, body, namespace))
	for _, l := range g.listeners {
		b = strconv.AppendQuote(b, l.Name)
		b = strconv.AppendQuote(b, l.Hostname)
	}
	return string(b)
}

// buildRoutes is the route configurations of gw, whose ext_authz filters
// (gatewayExtAuthz) are authz.
func (t *Translator) buildRoutes(gw *model.Gateway, authz []*model.ExternalAuth) ([]*routev3.RouteConfiguration, error) {
	opts := t.opts
	opts.eppBodyMode, opts.gatewayNamespace = gw.EPPBodyMode, gw.Namespace
	opts.extAuthz = authz
	groups, err := groupByPort(gw)
	if err != nil {
		return nil, err
	}
	out := make([]*routev3.RouteConfiguration, 0, len(groups))
	seen := map[string]bool{}
	for _, g := range groups {
		chains := []int{-1}
		if g.tls {
			chains = chains[:0]
			for i := range g.listeners {
				chains = append(chains, i)
			}
		}
		for _, chain := range chains {
			name := RouteConfigName(g.port, g.tls)
			if chain >= 0 {
				name = ChainRouteConfigName(g.port, g.listeners[chain].Name)
			}
			seen[name] = true
			if groupHasListenerFilters(g) {
				// A port with listener filters is translated whole: its
				// virtual hosts carry their listener's filter
				// configuration and fallback route (listenerfilter.go).
				delete(t.rcs, name)
				rc, err := buildRouteConfiguration(g, chain, opts)
				if err != nil {
					return nil, err
				}
				out = append(out, rc)
				continue
			}
			sig := rcSig(g, chain, gw.EPPBodyMode, gw.Namespace)
			st := t.rcs[name]
			if st == nil || st.sig != sig {
				st = &rcState{sig: sig, lists: make([]routeList[rcRoute], len(g.listeners)), vhosts: map[string]*vhState{},
					wild: map[string]bool{}, empties: map[string]*routev3.VirtualHost{}}
				t.rcs[name] = st
			}
			rc, ok := st.update(g, chain, opts)
			if !ok {
				// Not in the order the model promises: from scratch, and
				// from scratch again next time.
				delete(t.rcs, name)
				if rc, err = buildRouteConfiguration(g, chain, opts); err != nil {
					return nil, err
				}
			}
			out = append(out, rc)
		}
	}
	for name := range t.rcs {
		if !seen[name] {
			delete(t.rcs, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == len(t.routes) {
		same := true
		for i := range out {
			same = same && out[i] == t.routes[i]
		}
		if same {
			return t.routes, nil
		}
	}
	t.routes = out
	return out, nil
}

// update brings st to g's current routes and returns the route
// configuration: the last one when nothing in it changed.
func (st *rcState) update(g portGroup, chain int, opts Options) (*routev3.RouteConfiguration, bool) {
	listenerHosts := make([]string, len(g.listeners))
	for i, l := range g.listeners {
		listenerHosts[i] = l.Hostname
	}
	changed := map[string]bool{}
	memo := anyMemo{}
	for li, l := range g.listeners {
		if chain >= 0 && li != chain {
			continue
		}
		ok := st.lists[li].diff(l.Routes,
			func(o rcRoute, r *model.Route) rcRoute {
				if o.r != r {
					for _, h := range o.hosts {
						if st.setMemberRoute(h, li, o.r, r, len(g.listeners)) {
							changed[h] = true
						}
					}
					o.r = r
				}
				return o
			},
			func(o *rcRoute, r *model.Route) rcRoute {
				if o != nil {
					st.dropMember(o, li, changed)
				}
				nr := rcRoute{r: r}
				for _, h := range routeHostnames(l.Hostname, r.Hostnames) {
					if ownerHostname(h, listenerHosts) == l.Hostname {
						nr.hosts = append(nr.hosts, h)
					}
				}
				if len(nr.hosts) > 0 {
					nr.entries = buildRoutes(r, g, opts, memo)
				}
				for _, h := range nr.hosts {
					st.addMember(h, vhMember{li: li, r: r, entries: nr.entries})
					changed[h] = true
				}
				return nr
			},
			func(o rcRoute) { st.dropMember(&o, li, changed) })
		if !ok {
			return nil, false
		}
	}

	port := strconv.FormatUint(uint64(g.port), 10)
	bulk := len(changed) > 16 && len(changed) > len(st.sortedVH)/8
	var gone []string
	var added []*routev3.VirtualHost
	for h := range changed {
		vs := st.vhosts[h]
		if vs == nil || len(vs.members) == 0 {
			if vs != nil {
				delete(st.vhosts, h)
				delete(st.wild, h)
				gone = append(gone, h)
			}
			continue
		}
		var entries []routeEntry
		if len(vs.members) == 1 {
			entries = withHostKey(vs.members[0].entries, h, vs.members[0].r.Hostnames)
		} else {
			seen := map[*model.Route]bool{}
			for _, m := range vs.members {
				if !seen[m.r] {
					seen[m.r] = true
					entries = append(entries, withHostKey(m.entries, h, m.r.Hostnames)...)
				}
			}
		}
		isNew := vs.vh == nil
		vs.vh = virtualHost(h, port, entries)
		if isNew && (h == "*" || strings.HasPrefix(h, "*.")) {
			st.wild[h] = true
		}
		if bulk {
			continue
		}
		if i, found := searchVH(st.sortedVH, h); found {
			st.sortedVH[i] = vs.vh
		} else {
			added = append(added, vs.vh)
		}
	}
	if bulk {
		hosts := slices.Sorted(maps.Keys(st.vhosts))
		st.sortedVH = make([]*routev3.VirtualHost, len(hosts))
		for i, h := range hosts {
			st.sortedVH[i] = st.vhosts[h].vh
		}
	} else {
		st.sortedVH = spliceVHosts(st.sortedVH, gone, added)
	}

	// Routeless virtual hosts and the misdirected one, as
	// buildRouteConfiguration makes them.
	var empties, misdirected []string
	exists := func(h string) bool { return st.vhosts[h] != nil || slices.Contains(empties, h) }
	if chain < 0 {
		for _, h := range listenerHosts {
			if h == "" || exists(h) {
				continue
			}
			caught := false
			for d := range st.wild {
				caught = caught || (d != h && (d == "*" || covers(d, h)))
			}
			for _, d := range empties {
				caught = caught || (d != h && (d == "*" || covers(d, h)))
			}
			if caught {
				empties = append(empties, h)
			}
		}
	} else {
		own := g.listeners[chain].Hostname
		if own != "" && st.vhosts[own] == nil {
			empties = append(empties, own)
		}
		misdirected = misdirectedDomains(own, listenerHosts)
	}
	sort.Strings(empties)
	misdirChanged := false
	switch {
	case len(misdirected) == 0:
		misdirChanged = st.misdir != nil
		st.misdir = nil
	case st.misdir == nil || !slices.Equal(st.misdir.Domains, misdirected):
		st.misdir = misdirectedVirtualHost(misdirected, port)
		misdirChanged = true
	}
	if st.rc != nil && len(changed) == 0 && !misdirChanged && slices.Equal(empties, st.emptyNames) {
		return st.rc, true
	}
	for h := range st.empties {
		if !slices.Contains(empties, h) {
			delete(st.empties, h)
		}
	}
	for _, h := range empties {
		if st.empties[h] == nil {
			st.empties[h] = virtualHost(h, port, nil)
		}
	}
	st.emptyNames = empties

	rc := &routev3.RouteConfiguration{
		Name:                     RouteConfigName(g.port, g.tls),
		ValidateClusters:         wrapperspb.Bool(false),
		IgnorePortInHostMatching: true,
	}
	if chain >= 0 {
		rc.Name = ChainRouteConfigName(g.port, g.listeners[chain].Name)
	}
	rc.VirtualHosts = make([]*routev3.VirtualHost, 0, len(st.sortedVH)+len(empties)+1)
	e := 0
	for i, vh := range st.sortedVH {
		for e < len(empties) && empties[e] < vhHost(vh) {
			rc.VirtualHosts = append(rc.VirtualHosts, st.empties[empties[e]])
			e++
		}
		if e == len(empties) {
			rc.VirtualHosts = append(rc.VirtualHosts, st.sortedVH[i:]...)
			break
		}
		rc.VirtualHosts = append(rc.VirtualHosts, st.sortedVH[i])
	}
	for ; e < len(empties); e++ {
		rc.VirtualHosts = append(rc.VirtualHosts, st.empties[empties[e]])
	}
	if st.misdir != nil {
		rc.VirtualHosts = append(rc.VirtualHosts, st.misdir)
	}
	st.rc = rc
	return rc, true
}

// addMember adds m to the virtual host of h, in (listener, route) order.
func (st *rcState) addMember(h string, m vhMember) {
	vs := st.vhosts[h]
	if vs == nil {
		vs = &vhState{}
		st.vhosts[h] = vs
	}
	n := len(vs.members)
	if n == 0 || memberCmp(vs.members[n-1], m.li, m.r) < 0 {
		vs.members = append(vs.members, m)
		return
	}
	i, _ := slices.BinarySearchFunc(vs.members, m, func(a, b vhMember) int { return memberCmp(a, b.li, b.r) })
	vs.members = slices.Insert(vs.members, i, m)
}

// member is the index of listener li's member for route r in vs, or -1.
func (vs *vhState) member(li int, r *model.Route) int {
	i, found := slices.BinarySearchFunc(vs.members, vhMember{li: li, r: r}, func(a, b vhMember) int { return memberCmp(a, b.li, b.r) })
	if !found {
		return -1
	}
	return i
}

// dropMember removes o's entries (listener li) from its hostnames' virtual
// hosts, marking them changed.
func (st *rcState) dropMember(o *rcRoute, li int, changed map[string]bool) {
	for _, h := range o.hosts {
		changed[h] = true
		if vs := st.vhosts[h]; vs != nil {
			if i := vs.member(li, o.r); i >= 0 && vs.members[i].r == o.r {
				vs.members = slices.Delete(vs.members, i, i+1)
			}
		}
	}
}

// setMemberRoute records that listener li's route old is now the equal
// route r (its entries stay). It reports whether the virtual host must be
// built again: another of the port's listeners (n in all) holds the same
// route in it, and the full translation lists a route's entries once per
// distinct *model.Route.
func (st *rcState) setMemberRoute(h string, li int, old, r *model.Route, n int) bool {
	vs := st.vhosts[h]
	if vs == nil {
		return false
	}
	if i := vs.member(li, old); i >= 0 && vs.members[i].r == old {
		vs.members[i].r = r
	}
	for other := 0; other < n; other++ {
		if other != li && vs.member(other, r) >= 0 {
			return true
		}
	}
	return false
}
