// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// validatorAll is what protoc-gen-validate generates on every Envoy type.
type validatorAll interface{ ValidateAll() error }

// Validate checks a Resources value before it is served. It returns every
// problem found, joined (errors.Join), each naming its resource:
//
//  1. every resource passes its ValidateAll() (Envoy's own proto rules),
//     and so does every message packed in an Any inside it (filter configs,
//     per-route configs, load balancing policies, transport sockets,
//     protocol options), which ValidateAll does not look into;
//  2. names are unique within each resource type;
//  3. every route configuration a listener's RDS names exists;
//  4. every cluster a route sends to (cluster, weighted_clusters, request
//     mirrors), a TCP proxy sends to, or an ext_proc filter calls (listener
//     filter or per-route override) exists, except the two deliberate
//     non-clusters
//     ExtProcPlaceholderCluster and InvalidBackendCluster;
//  5. every EDS cluster's service name has a ClusterLoadAssignment;
//  6. no header mutation at any level of a route configuration is one
//     Envoy's HeaderParser refuses: a ':'-prefixed or host name, or a
//     value that is not a literal substitution format string (see
//     checkHeaderMutations);
//  7. no cluster's HttpProtocolOptions auto_config (HTTP version by ALPN)
//     goes without the TLS transport socket that negotiates it: Envoy
//     refuses such a cluster ("ALPN configured for cluster ... which has a
//     non-ALPN transport socket", ClusterImplBase in
//     source/common/upstream/upstream_impl.cc; see checkAutoConfig).
func Validate(res Resources) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	n := validateEach(res, fail)
	checkReferences(res, n, fail)
	for _, rc := range res.Routes {
		checkHeaderMutations(rc, fail)
	}
	return errors.Join(errs...)
}

// resourceNames are the names present per type.
type resourceNames struct {
	listeners, routes, clusters, endpoints map[string]bool
	// memo has every Any validateEach unpacked.
	memo anyMemo
}

// validateEach runs validateDeep on every resource and checks names are
// unique per type (Validate rules 1 and 2).
func validateEach(res Resources, fail func(string, ...any)) resourceNames {
	listeners, routes, clusters, endpoints := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	memo := anyMemo{}
	for _, l := range res.Listeners {
		if err := validateDeep(l, memo); err != nil {
			fail("listener %q: %w", l.GetName(), err)
		}
		if listeners[l.GetName()] {
			fail("listener %q: duplicate name", l.GetName())
		}
		listeners[l.GetName()] = true
	}
	for _, r := range res.Routes {
		if err := validateDeep(r, memo); err != nil {
			fail("route configuration %q: %w", r.GetName(), err)
		}
		if routes[r.GetName()] {
			fail("route configuration %q: duplicate name", r.GetName())
		}
		routes[r.GetName()] = true
	}
	for _, c := range res.Clusters {
		if err := validateDeep(c, memo); err != nil {
			fail("cluster %q: %w", c.GetName(), err)
		}
		if clusters[c.GetName()] {
			fail("cluster %q: duplicate name", c.GetName())
		}
		clusters[c.GetName()] = true
	}
	for _, e := range res.Endpoints {
		if err := validateDeep(e, memo); err != nil {
			fail("cluster load assignment %q: %w", e.GetClusterName(), err)
		}
		if endpoints[e.GetClusterName()] {
			fail("cluster load assignment %q: duplicate name", e.GetClusterName())
		}
		endpoints[e.GetClusterName()] = true
	}
	return resourceNames{listeners: listeners, routes: routes, clusters: clusters, endpoints: endpoints, memo: memo}
}

// checkReferences checks that every name one resource uses exists
// (Validate rules 3 to 5), and the transport socket auto_config needs
// (rule 7).
func checkReferences(res Resources, n resourceNames, fail func(string, ...any)) {
	needCluster := clusterNeeds(n.clusters, fail)
	for _, l := range res.Listeners {
		checkListenerRefs(l, n.memo, n.routes, needCluster, fail)
	}
	for _, rc := range res.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				owner := fmt.Sprintf("route configuration %q virtual host %q route %q", rc.GetName(), vh.GetName(), r.GetName())
				checkRouteRefs(owner, r, n.memo, needCluster, fail)
			}
		}
	}
	for _, c := range res.Clusters {
		checkEDSRef(c, n.endpoints, fail)
		checkAutoConfig(c, n.memo, fail)
	}
}

// checkAutoConfig checks that a cluster whose HttpProtocolOptions has
// auto_config has a transport socket that can do ALPN, the only one of
// ours being TLS (Validate rule 7). Envoy sets the cluster's USE_ALPN
// feature for auto_config (source/extensions/upstreams/http/config.cc)
// and refuses the cluster when its transport socket factory does not
// support ALPN; raw_buffer (no transport socket) does not.
func checkAutoConfig(c *clusterv3.Cluster, memo anyMemo, fail func(string, ...any)) {
	a := c.GetTypedExtensionProtocolOptions()[HTTPProtocolOptionsKey]
	if a == nil {
		return
	}
	o, err := unpackAs[*httpv3.HttpProtocolOptions](memo, a)
	if err != nil || o.GetAutoConfig() == nil {
		return // rule 1 reports an Any that does not unpack
	}
	if c.GetTransportSocket().GetName() != TransportSocketTLS {
		fail("cluster %q: auto_config (HTTP version by ALPN) without a TLS transport socket; Envoy refuses a cluster whose transport socket cannot do ALPN", c.GetName())
	}
}

// clusterNeeds returns the check that a cluster named by owner exists in
// clusters; the two deliberate non-clusters ExtProcPlaceholderCluster and
// InvalidBackendCluster always pass.
func clusterNeeds(clusters map[string]bool, fail func(string, ...any)) func(owner, cluster string) {
	return func(owner, cluster string) {
		if cluster == ExtProcPlaceholderCluster || cluster == InvalidBackendCluster {
			return
		}
		if !clusters[cluster] {
			fail("%s: cluster %q is not in CDS", owner, cluster)
		}
	}
}

// checkListenerRefs checks that the route configuration every HCM of l
// names over RDS is in routes, and that every ext_proc and ext_authz
// filter's and TCP proxy's cluster exists (Validate rules 3 and 4).
func checkListenerRefs(l *listenerv3.Listener, memo anyMemo, routes map[string]bool,
	needCluster func(owner, cluster string), fail func(string, ...any),
) {
	tcp, err := tcpProxyClusters(l, memo)
	if err != nil {
		fail("listener %q: %w", l.GetName(), err)
	}
	for _, c := range tcp {
		needCluster(fmt.Sprintf("listener %q tcp_proxy", l.GetName()), c)
	}
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			if f.GetTypedConfig() == nil || !f.GetTypedConfig().MessageIs((*hcmv3.HttpConnectionManager)(nil)) {
				continue
			}
			hcm, err := unpackAs[*hcmv3.HttpConnectionManager](memo, f.GetTypedConfig())
			if err != nil {
				fail("listener %q: %w", l.GetName(), err)
				continue
			}
			if rds := hcm.GetRds(); rds != nil && !routes[rds.GetRouteConfigName()] {
				fail("listener %q: route configuration %q is not in RDS", l.GetName(), rds.GetRouteConfigName())
			}
			for _, hf := range hcm.GetHttpFilters() {
				tc := hf.GetTypedConfig()
				switch {
				case tc == nil:
				case tc.MessageIs((*extprocv3.ExternalProcessor)(nil)):
					if ep, err := unpackAs[*extprocv3.ExternalProcessor](memo, tc); err == nil {
						needCluster(fmt.Sprintf("listener %q ext_proc", l.GetName()), ep.GetGrpcService().GetEnvoyGrpc().GetClusterName())
					}
				case tc.MessageIs((*extauthzv3.ExtAuthz)(nil)):
					if ea, err := unpackAs[*extauthzv3.ExtAuthz](memo, tc); err == nil {
						owner := fmt.Sprintf("listener %q %s", l.GetName(), hf.GetName())
						if gs := ea.GetGrpcService(); gs != nil {
							needCluster(owner, gs.GetEnvoyGrpc().GetClusterName())
						} else {
							needCluster(owner, ea.GetHttpService().GetServerUri().GetCluster())
						}
					}
				}
			}
		}
	}
}

// checkRouteRefs checks that every cluster route r sends to (cluster,
// weighted_clusters, request mirrors) or calls through an ext_proc
// per-route override exists (Validate rule 4).
func checkRouteRefs(owner string, r *routev3.Route, memo anyMemo, needCluster func(owner, cluster string), fail func(string, ...any)) {
	checkExtProc(owner, r.GetTypedPerFilterConfig(), memo, needCluster, fail)
	ra := r.GetRoute()
	if ra == nil {
		return
	}
	if c := ra.GetCluster(); c != "" {
		needCluster(owner, c)
	}
	for _, cw := range ra.GetWeightedClusters().GetClusters() {
		needCluster(owner, cw.GetName())
		checkExtProc(owner, cw.GetTypedPerFilterConfig(), memo, needCluster, fail)
	}
	for _, m := range ra.GetRequestMirrorPolicies() {
		needCluster(owner, m.GetCluster())
	}
}

// checkEDSRef checks that an EDS cluster's service name has a
// ClusterLoadAssignment in endpoints (Validate rule 5).
func checkEDSRef(c *clusterv3.Cluster, endpoints map[string]bool, fail func(string, ...any)) {
	if c.GetType() == clusterv3.Cluster_EDS && !endpoints[edsServiceName(c)] {
		fail("cluster %q: no ClusterLoadAssignment %q in EDS", c.GetName(), edsServiceName(c))
	}
}

func checkExtProc(owner string, tpfc map[string]*anypb.Any, memo anyMemo, needCluster func(owner, cluster string), fail func(string, ...any)) {
	a := tpfc[FilterExtProc]
	if a == nil {
		return
	}
	per, err := unpackAs[*extprocv3.ExtProcPerRoute](memo, a)
	if err != nil {
		fail("%s: ext_proc per-route config: %w", owner, err)
		return
	}
	if gs := per.GetOverrides().GetGrpcService(); gs != nil {
		needCluster(owner+" ext_proc", gs.GetEnvoyGrpc().GetClusterName())
	}
}

// validateDeep runs ValidateAll on m and on every message packed in an Any
// anywhere inside it, recursively. An Any whose type is not linked into the
// binary is an error: we only emit types we import. memo holds the result
// for every Any already checked in this Validate call, by type URL and
// bytes (many clusters carry byte-identical protocol options and load
// balancing policies); nil means no memo.
func validateDeep(m proto.Message, memo anyMemo) error {
	var errs []error
	if v, ok := m.(validatorAll); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, err)
		}
	}
	walkAnys(m, func(a *anypb.Any) {
		u, ok := memo.get(a)
		if !ok {
			u.msg, u.err = validateAny(a, memo)
			memo.put(a, u)
		}
		if u.err != nil {
			errs = append(errs, u.err)
		}
	})
	return errors.Join(errs...)
}

// validateAny unpacks a and runs validateDeep on its content; the message
// is nil when a cannot be unpacked.
func validateAny(a *anypb.Any, memo anyMemo) (proto.Message, error) {
	inner, err := a.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.GetTypeUrl(), err)
	}
	if err := validateDeep(inner, memo); err != nil {
		return inner, fmt.Errorf("%s: %w", a.GetTypeUrl(), err)
	}
	return inner, nil
}

// anyMemo is, per type URL, then per packed bytes, the unpacked message
// and validateAny's result.
type anyMemo map[string]map[string]unpacked

type unpacked struct {
	msg proto.Message
	err error
}

func (m anyMemo) get(a *anypb.Any) (unpacked, bool) {
	u, ok := m[a.GetTypeUrl()][string(a.GetValue())]
	return u, ok
}

func (m anyMemo) put(a *anypb.Any, u unpacked) {
	if m == nil {
		return
	}
	byValue := m[a.GetTypeUrl()]
	if byValue == nil {
		byValue = map[string]unpacked{}
		m[a.GetTypeUrl()] = byValue
	}
	byValue[string(a.GetValue())] = u
}

// unpackAs is a's content as a T: the message memo holds (read only), or a
// fresh unmarshal. An Any of another type is an error.
func unpackAs[T proto.Message](memo anyMemo, a *anypb.Any) (T, error) {
	var zero T
	msg := proto.Message(nil)
	if u, ok := memo.get(a); ok && u.msg != nil {
		msg = u.msg
	} else {
		m, err := a.UnmarshalNew()
		if err != nil {
			return zero, err
		}
		msg = m
	}
	t, ok := msg.(T)
	if !ok {
		return zero, fmt.Errorf("%s: not a %T", a.GetTypeUrl(), zero)
	}
	return t, nil
}

// walkAnys calls fn for every Any directly or indirectly inside m, without
// descending into the Anys themselves (validateDeep does, after unpacking).
//
// It walks the generated Go structs (exported fields, and oneof wrapper
// types, as the protobuf-go generated code guide documents them) with
// package reflect rather than protoreflect, whose per-field accessors cost
// a type lookup on every call, and it visits only the fields whose type can
// lead to an Any (see reachesAny), so the bulk of a configuration
// (addresses, matchers, endpoints) is skipped.
func walkAnys(m proto.Message, fn func(*anypb.Any)) {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return
	}
	walkStruct(v, fn)
}

// walkStruct walks v, a non-nil pointer to a generated message struct.
func walkStruct(v reflect.Value, fn func(*anypb.Any)) {
	if v.Type() == anyPtrType {
		fn(v.Interface().(*anypb.Any))
		return
	}
	s := v.Elem()
	for _, f := range structPlan(v.Type()) {
		fv := s.Field(f.index)
		switch f.kind {
		case fieldMessage:
			if !fv.IsNil() {
				walkStruct(fv, fn)
			}
		case fieldList:
			for i := 0; i < fv.Len(); i++ {
				if e := fv.Index(i); !e.IsNil() {
					walkStruct(e, fn)
				}
			}
		case fieldMap:
			it := fv.MapRange()
			for it.Next() {
				if e := it.Value(); !e.IsNil() {
					walkStruct(e, fn)
				}
			}
		case fieldOneof:
			// A oneof is an interface holding a pointer to a wrapper
			// struct with one field, the member's value.
			if fv.IsNil() || fv.Elem().Kind() != reflect.Pointer || fv.Elem().IsNil() {
				continue
			}
			w := fv.Elem().Elem()
			if w.Kind() != reflect.Struct || w.NumField() != 1 {
				continue
			}
			if inner := w.Field(0); isMessagePtr(inner.Type()) && !inner.IsNil() && typeReachesAny(inner.Type()) {
				walkStruct(inner, fn)
			}
		}
	}
}

type fieldKind int

const (
	fieldMessage fieldKind = iota // *M
	fieldList                     // []*M
	fieldMap                      // map[K]*M
	fieldOneof                    // oneof interface; checked per value
)

type fieldStep struct {
	index int
	kind  fieldKind
}

var (
	anyPtrType     = reflect.TypeFor[*anypb.Any]()
	protoMessageIf = reflect.TypeFor[proto.Message]()
	// planCache maps a message pointer type to its structPlan.
	planCache sync.Map // reflect.Type -> []fieldStep
	// reachesCache maps a message pointer type to typeReachesAny.
	reachesCache sync.Map // reflect.Type -> bool
)

// structPlan lists the fields of the message struct *T (t = *T) that can
// lead to an Any: message, repeated message and map-of-message fields
// whose message type reaches Any, and oneofs with such a member. Computed
// once per type.
func structPlan(t reflect.Type) []fieldStep {
	if v, ok := planCache.Load(t); ok {
		return v.([]fieldStep)
	}
	var plan []fieldStep
	md := reflect.Zero(t).Interface().(proto.Message).ProtoReflect().Descriptor()
	st := t.Elem()
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		if !f.IsExported() {
			continue
		}
		ft := f.Type
		switch {
		case f.Tag.Get("protobuf_oneof") != "":
			if oneofReachesAny(md.Oneofs().ByName(protoreflect.Name(f.Tag.Get("protobuf_oneof")))) {
				plan = append(plan, fieldStep{i, fieldOneof})
			}
		case isMessagePtr(ft) && typeReachesAny(ft):
			plan = append(plan, fieldStep{i, fieldMessage})
		case ft.Kind() == reflect.Slice && isMessagePtr(ft.Elem()) && typeReachesAny(ft.Elem()):
			plan = append(plan, fieldStep{i, fieldList})
		case ft.Kind() == reflect.Map && isMessagePtr(ft.Elem()) && typeReachesAny(ft.Elem()):
			plan = append(plan, fieldStep{i, fieldMap})
		}
	}
	planCache.Store(t, plan)
	return plan
}

// oneofReachesAny reports whether a member of od can hold an Any (true
// when od is unknown, to stay on the safe side).
func oneofReachesAny(od protoreflect.OneofDescriptor) bool {
	if od == nil {
		return true
	}
	fds := od.Fields()
	for i := 0; i < fds.Len(); i++ {
		if t := messageOf(fds.Get(i)); t != nil && reachesAny(t, map[protoreflect.FullName]bool{}) {
			return true
		}
	}
	return false
}

func isMessagePtr(t reflect.Type) bool {
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && t.Implements(protoMessageIf)
}

// typeReachesAny reports whether the message type t (a pointer to a
// generated struct) is Any or can hold one at some depth.
func typeReachesAny(t reflect.Type) bool {
	if v, ok := reachesCache.Load(t); ok {
		return v.(bool)
	}
	md := reflect.Zero(t).Interface().(proto.Message).ProtoReflect().Descriptor()
	r := reachesAny(md, map[protoreflect.FullName]bool{})
	reachesCache.Store(t, r)
	return r
}

// messageOf is the message type a field holds (a map's value type), nil
// for scalar fields.
func messageOf(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		return fd.MapValue().Message()
	}
	return fd.Message()
}

// reachesAny reports whether md is Any or has a field whose type reaches
// Any, searching the type graph depth first; seen breaks cycles (a type
// already on the search is explored elsewhere).
func reachesAny(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if md.FullName() == anyFullName {
		return true
	}
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fds := md.Fields()
	for i := 0; i < fds.Len(); i++ {
		if t := messageOf(fds.Get(i)); t != nil && reachesAny(t, seen) {
			return true
		}
	}
	return false
}

var anyFullName = (&anypb.Any{}).ProtoReflect().Descriptor().FullName()
