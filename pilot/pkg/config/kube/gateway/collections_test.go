// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// pipeline is Build over static input collections that a test edits.
type pipeline struct {
	t        testing.TB
	classes  krt.StaticCollection[*gwv1.GatewayClass]
	gateways krt.StaticCollection[*gwv1.Gateway]
	http     krt.StaticCollection[*gwv1.HTTPRoute]
	grpc     krt.StaticCollection[*gwv1.GRPCRoute]
	tls      krt.StaticCollection[*gwv1.TLSRoute]
	tcp      krt.StaticCollection[*gwv1.TCPRoute]
	grants   krt.StaticCollection[*gwv1.ReferenceGrant]
	ns       krt.StaticCollection[*corev1.Namespace]
	services krt.StaticCollection[*corev1.Service]
	pools    krt.StaticCollection[*inferencev1.InferencePool]
	cms      krt.StaticCollection[*corev1.ConfigMap]
	secrets  krt.StaticCollection[*corev1.Secret]
	policies krt.StaticCollection[*gwv1.BackendTLSPolicy]
	rules    krt.StaticCollection[kubelib.DestinationRule]
	sets     krt.StaticCollection[*gwv1.ListenerSet]
	procs    krt.StaticCollection[*imv1alpha1.ExternalProcessor]
	out      Outputs
}

// seedObjects are the seed scenario's objects: class, Gateway, route, pool
// and EPP Service.
func seedObjects() []any {
	return []any{seed.GatewayClassObject(), seed.Gateway(), seed.HTTPRoute(), seed.InferencePool(), seed.EPPService()}
}

// newPipeline builds the controller over static inputs holding objs, with
// the default per-namespace limits (as pilot-discovery runs).
func newPipeline(t testing.TB, inference bool, objs ...any) *pipeline {
	t.Helper()
	return newLimitedPipeline(t, inference, LimitsOf(features.Defaults()), objs...)
}

func newLimitedPipeline(t testing.TB, inference bool, limits TenantLimits, objs ...any) *pipeline {
	t.Helper()
	stop := krt.WithStop(t.Context().Done())
	p := &pipeline{
		t:        t,
		classes:  krt.NewStaticCollection[*gwv1.GatewayClass](nil, nil, stop),
		gateways: krt.NewStaticCollection[*gwv1.Gateway](nil, nil, stop),
		http:     krt.NewStaticCollection[*gwv1.HTTPRoute](nil, nil, stop),
		grpc:     krt.NewStaticCollection[*gwv1.GRPCRoute](nil, nil, stop),
		tls:      krt.NewStaticCollection[*gwv1.TLSRoute](nil, nil, stop),
		tcp:      krt.NewStaticCollection[*gwv1.TCPRoute](nil, nil, stop),
		grants:   krt.NewStaticCollection[*gwv1.ReferenceGrant](nil, nil, stop),
		ns:       krt.NewStaticCollection[*corev1.Namespace](nil, nil, stop),
		services: krt.NewStaticCollection[*corev1.Service](nil, nil, stop),
		pools:    krt.NewStaticCollection[*inferencev1.InferencePool](nil, nil, stop),
		cms:      krt.NewStaticCollection[*corev1.ConfigMap](nil, nil, stop),
		secrets:  krt.NewStaticCollection[*corev1.Secret](nil, nil, stop),
		policies: krt.NewStaticCollection[*gwv1.BackendTLSPolicy](nil, nil, stop),
		rules:    krt.NewStaticCollection[kubelib.DestinationRule](nil, nil, stop),
		sets:     krt.NewStaticCollection[*gwv1.ListenerSet](nil, nil, stop),
		procs:    krt.NewStaticCollection[*imv1alpha1.ExternalProcessor](nil, nil, stop),
	}
	for _, o := range objs {
		p.add(o)
	}
	p.out = Build(Inputs{
		GatewayClasses: p.classes, Gateways: p.gateways, HTTPRoutes: p.http, GRPCRoutes: p.grpc,
		TLSRoutes: p.tls, TCPRoutes: p.tcp,
		ReferenceGrants: p.grants, Namespaces: p.ns, Services: p.services, InferencePools: p.pools,
		ConfigMaps: p.cms, Secrets: p.secrets, BackendTLSPolicies: p.policies, DestinationRules: p.rules, ListenerSets: p.sets,
		ExternalProcessors: p.procs,
	}, Options{ControllerName: controller, ClusterDomain: "cluster.local", InferenceEnabled: inference,
		Limits: limits, Krt: []krt.CollectionOption{stop}})
	p.settle()
	return p
}

func (p *pipeline) add(o any) {
	p.t.Helper()
	switch o := o.(type) {
	case *gwv1.GatewayClass:
		p.classes.UpdateObject(o)
	case *gwv1.Gateway:
		p.gateways.UpdateObject(o)
	case *gwv1.HTTPRoute:
		p.http.UpdateObject(o)
	case *gwv1.GRPCRoute:
		p.grpc.UpdateObject(o)
	case *gwv1.TLSRoute:
		p.tls.UpdateObject(o)
	case *gwv1.TCPRoute:
		p.tcp.UpdateObject(o)
	case *gwv1.ReferenceGrant:
		p.grants.UpdateObject(o)
	case *corev1.Namespace:
		p.ns.UpdateObject(o)
	case *corev1.Service:
		p.services.UpdateObject(o)
	case *inferencev1.InferencePool:
		p.pools.UpdateObject(o)
	case *corev1.ConfigMap:
		p.cms.UpdateObject(o)
	case *corev1.Secret:
		p.secrets.UpdateObject(o)
	case *gwv1.BackendTLSPolicy:
		p.policies.UpdateObject(o)
	case *gwv1.ListenerSet:
		p.sets.UpdateObject(o)
	case kubelib.DestinationRule:
		p.rules.UpdateObject(o)
	case *imv1alpha1.ExternalProcessor:
		p.procs.UpdateObject(o)
	default:
		p.t.Fatalf("unsupported object %T", o)
	}
}

// settle waits until every output collection has synced and processed
// everything queued (a marker object round-trips through the pipeline).
func (p *pipeline) settle() {
	p.t.Helper()
	cs := []krt.Syncer{p.out.ClassStatuses, p.out.Gateways, p.out.GatewayStatuses, p.out.Routes,
		p.out.HTTPRouteStatuses, p.out.Models}
	if p.out.PoolStatuses != nil {
		cs = append(cs, p.out.PoolStatuses, p.out.ShadowServices)
	}
	for _, c := range cs {
		if !c.WaitUntilSynced(p.t.Context().Done()) {
			p.t.Fatal("pipeline did not sync")
		}
	}
}

// eventually waits for cond on the outputs (derived collections update on
// their own goroutines), printing describe on failure.
func (p *pipeline) eventually(what string, cond func() bool, describe func() string) {
	p.t.Helper()
	poll.UntilOr(p.t, 10*time.Second, what, cond, describe)
}

func (p *pipeline) poolStatus(ns, name string) []inferencev1.ParentStatus {
	if s := p.out.PoolStatuses.GetKey(ns + "/" + name); s != nil {
		return s.Parents
	}
	return nil
}

func (p *pipeline) routeStatus(ns, name string) []gwv1.RouteParentStatus {
	if s := p.out.HTTPRouteStatuses.GetKey(ns + "/" + name); s != nil {
		return s.Parents
	}
	return nil
}

func conditionsOf(conds []metav1.Condition) string {
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "%s=%s (%s) %q; ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func TestSeedScenario(t *testing.T) {
	p := newPipeline(t, true, seedObjects()...)
	shadowKey := seed.Namespace + "/vllm-llama3-8b-ip-22dc7de1"
	p.eventually("shadow Service and pool status", func() bool {
		return p.out.ShadowServices.GetKey(shadowKey) != nil && len(p.poolStatus(seed.Namespace, seed.PoolName)) == 1
	}, func() string { return fmt.Sprint(p.out.ShadowServices.List()) })

	svc := p.out.ShadowServices.GetKey(shadowKey).Apply
	port := svc.Spec.Ports[0]
	if *port.Port != 54321 || port.TargetPort.IntValue() != 8000 || *port.Name != "http-0" || *svc.Spec.ClusterIP != "None" {
		t.Errorf("shadow Service port %d -> %v (%s), clusterIP %s; want 54321 -> 8000 (http-0), None",
			*port.Port, port.TargetPort, *port.Name, *svc.Spec.ClusterIP)
	}

	st := p.poolStatus(seed.Namespace, seed.PoolName)[0]
	wantRef := inferencev1.ParentReference{Group: ptr.To(inferencev1.Group("gateway.networking.k8s.io")), Kind: "Gateway",
		Namespace: seed.GatewayNamespace, Name: seed.GatewayName}
	if d := cmp.Diff(wantRef, st.ParentRef); d != "" {
		t.Errorf("parentRef (-want +got):\n%s", d)
	}
	if st.ControllerName != controller {
		t.Errorf("controllerName = %q", st.ControllerName)
	}
	want := "Accepted=True (Accepted); ResolvedRefs=True (ResolvedRefs)"
	if got := shortConditions(st.Conditions); got != want {
		t.Errorf("pool conditions = %s, want %s (%s)", got, want, conditionsOf(st.Conditions))
	}

	rs := p.routeStatus(seed.Namespace, seed.RouteName)
	if len(rs) != 1 || shortConditions(rs[0].Conditions) != want || rs[0].ControllerName != controller {
		t.Errorf("route status = %+v", rs)
	}

	gs := p.out.GatewayStatuses.GetKey(seed.GatewayNamespace + "/" + seed.GatewayName)
	if gs == nil || len(gs.Status.Listeners) != 1 || gs.Status.Listeners[0].AttachedRoutes != 1 {
		t.Fatalf("gateway status = %+v, want one listener with one attached route", gs)
	}

	gw := p.out.Models.GetKey(seed.GatewayNamespace + "/" + seed.GatewayName)
	if gw == nil || len(gw.Listeners) != 1 || len(gw.Listeners[0].Routes) != 1 {
		t.Fatalf("translator gateway = %+v", gw)
	}
	b := gw.Listeners[0].Routes[0].Rules[0].Backends[0]
	wantBackend := model.Backend{Weight: 1, Pool: &model.PoolBackend{
		Namespace: seed.Namespace, Name: seed.PoolName,
		ShadowService: "vllm-llama3-8b-ip-22dc7de1", Host: "vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local",
		Port: 54321, TargetPorts: []int32{8000}, AppProtocol: "http",
		EPP: &model.EPPBackend{Service: seed.EPPName, Host: "vllm-llama3-8b-epp.llm-namespace.svc.cluster.local", Port: 9002,
			AppProtocol: "http2", FailureMode: inferencev1.EndpointPickerFailOpen},
	}}
	if d := cmp.Diff(wantBackend, b); d != "" {
		t.Errorf("translator backend (-want +got):\n%s", d)
	}
}

func shortConditions(conds []metav1.Condition) string {
	parts := make([]string, len(conds))
	for i, c := range conds {
		parts[i] = fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
	}
	return strings.Join(parts, "; ")
}

func TestPoolFollowsSpecChanges(t *testing.T) {
	p := newPipeline(t, true, seedObjects()...)
	pool := seed.InferencePool()
	pool.Spec.TargetPorts = []inferencev1.Port{{Number: 8000}, {Number: 8001}, {Number: 8002}}
	pool.Spec.AppProtocol = inferencev1.AppProtocolH2C
	pool.Spec.EndpointPickerRef.FailureMode = inferencev1.EndpointPickerFailClose
	p.add(pool)
	key := seed.Namespace + "/" + ShadowServiceName(seed.PoolName)
	p.eventually("three ports with h2c", func() bool {
		s := p.out.ShadowServices.GetKey(key)
		return s != nil && len(s.Apply.Spec.Ports) == 3
	}, nil)
	s := p.out.ShadowServices.GetKey(key).Apply
	for i, port := range s.Spec.Ports {
		if *port.Port != int32(54321+i) || port.TargetPort.IntValue() != 8000+i || ptr.Deref(port.AppProtocol, "") != "kubernetes.io/h2c" {
			t.Errorf("port %d: %d -> %v appProtocol %v", i, *port.Port, port.TargetPort, port.AppProtocol)
		}
	}
	if got := s.Labels[InferencePoolExtensionFailureModeLabel]; got != "FailClose" {
		t.Errorf("failure mode label = %q, want FailClose", got)
	}
}

func TestPoolOnlyThroughAnotherControllersGateway(t *testing.T) {
	other := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/other"}}
	gw := seed.Gateway()
	gw.Spec.GatewayClassName = "other"
	p := newPipeline(t, true, other, gw, seed.HTTPRoute(), seed.InferencePool(), seed.EPPService())
	// The route names only a Gateway that is not ours: nothing of ours
	// anywhere. Add a marker pool referenced by a route of ours to know the
	// pipeline has processed everything.
	marker(p)
	if got := p.out.ShadowServices.GetKey(seed.Namespace + "/" + ShadowServiceName(seed.PoolName)); got != nil {
		t.Errorf("shadow Service for a pool of another controller's Gateway: %+v", got)
	}
	if got := p.poolStatus(seed.Namespace, seed.PoolName); got != nil {
		t.Errorf("status entries for a pool of another controller's Gateway: %+v", got)
	}
	if got := p.routeStatus(seed.Namespace, seed.RouteName); got != nil {
		t.Errorf("route status entries for another controller's Gateway: %+v", got)
	}
}

// marker adds an own class, Gateway, pool and route in namespace "marker"
// and waits for the pool's shadow Service: everything added before it has
// been processed by then.
func marker(p *pipeline) {
	p.t.Helper()
	gc := seed.GatewayClassObject()
	gw := seed.Gateway()
	gw.Namespace, gw.Name = "marker", "marker-gw"
	route := seed.HTTPRoute()
	route.Namespace = "marker"
	route.Spec.ParentRefs[0].Namespace, route.Spec.ParentRefs[0].Name = ptr.To(gwv1.Namespace("marker")), "marker-gw"
	pool := seed.InferencePool()
	pool.Namespace = "marker"
	for _, o := range []any{gc, gw, pool, route} {
		p.add(o)
	}
	p.eventually("marker processed", func() bool {
		return p.out.ShadowServices.GetKey("marker/"+ShadowServiceName(seed.PoolName)) != nil
	}, nil)
}

func TestTwoGatewaysShareAPool(t *testing.T) {
	gw2 := seed.Gateway()
	gw2.Name = "gateway-2"
	route := seed.HTTPRoute()
	route.Spec.ParentRefs = append(route.Spec.ParentRefs, route.Spec.ParentRefs[0])
	route.Spec.ParentRefs[1].Name = "gateway-2"
	p := newPipeline(t, true, append(seedObjects(), gw2, route)...)
	p.eventually("two entries", func() bool { return len(p.poolStatus(seed.Namespace, seed.PoolName)) == 2 },
		func() string { return fmt.Sprint(p.poolStatus(seed.Namespace, seed.PoolName)) })
	st := p.poolStatus(seed.Namespace, seed.PoolName)
	if st[0].ParentRef.Name != "gateway" || st[1].ParentRef.Name != "gateway-2" {
		t.Errorf("parents = %s, %s; want gateway, gateway-2", st[0].ParentRef.Name, st[1].ParentRef.Name)
	}
	if n := len(p.out.ShadowServices.List()); n != 1 {
		t.Errorf("%d shadow Services, want 1", n)
	}
}

// A pool without endpointPickerRef (GIE conformance InferencePoolMissingEPPRef):
// the route stays Accepted=True and says ResolvedRefs=False/BackendNotFound
// naming the pool (its rule answers 500); the pool says
// Accepted=False/EndpointPickerRefMissing and, not being accepted, gets no
// shadow Service.
func TestPoolWithoutEndpointPickerRef(t *testing.T) {
	pool := seed.InferencePool()
	pool.Spec.EndpointPickerRef = nil
	p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), seed.HTTPRoute(), pool)
	p.eventually("status", func() bool {
		return len(p.poolStatus(seed.Namespace, seed.PoolName)) == 1 && len(p.routeStatus(seed.Namespace, seed.RouteName)) == 1
	}, nil)
	got := shortConditions(p.poolStatus(seed.Namespace, seed.PoolName)[0].Conditions)
	if want := "Accepted=False (EndpointPickerRefMissing); ResolvedRefs=True (ResolvedRefs)"; got != want {
		t.Errorf("conditions = %s, want %s", got, want)
	}
	route := conditionsOf(p.routeStatus(seed.Namespace, seed.RouteName)[0].Conditions)
	want := `Accepted=True (Accepted) "attached to Gateway gateway-namespace/gateway listener(s) http"; ResolvedRefs=False (BackendNotFound) ` +
		`"InferencePool llm-namespace/vllm-llama3-8b has no Endpoint Picker: spec.endpointPickerRef is not set, ` +
		`and this implementation sends a pool's requests only through its Endpoint Picker"; `
	if route != want {
		t.Errorf("route conditions:\n got %s\nwant %s", route, want)
	}
	marker(p)
	if s := p.out.ShadowServices.GetKey(seed.Namespace + "/" + ShadowServiceName(seed.PoolName)); s != nil {
		t.Errorf("a shadow Service for a pool that is not accepted: %s", s.ResourceName())
	}
}

// A pool whose EPP Service does not exist (GIE conformance
// InferencePoolInvalidEPPService): the route stays Accepted=True and says
// ResolvedRefs=False/BackendNotFound naming the pool and its
// endpointPickerRef; the pool says ResolvedRefs=False/InvalidExtensionRef;
// the translator gets the backend as invalid (500, never a call to an EPP
// that does not exist). When the Service appears, everything resolves.
func TestPoolWithMissingEPPService(t *testing.T) {
	pool := seed.InferencePool()
	pool.Spec.EndpointPickerRef = &inferencev1.EndpointPickerRef{Kind: "Service", Name: "non-existent-epp-svc", Port: &inferencev1.Port{Number: 9002}}
	p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), seed.HTTPRoute(), pool)
	p.eventually("status", func() bool {
		return len(p.poolStatus(seed.Namespace, seed.PoolName)) == 1 && len(p.routeStatus(seed.Namespace, seed.RouteName)) == 1
	}, nil)
	route := conditionsOf(p.routeStatus(seed.Namespace, seed.RouteName)[0].Conditions)
	want := `Accepted=True (Accepted) "attached to Gateway gateway-namespace/gateway listener(s) http"; ResolvedRefs=False (BackendNotFound) ` +
		`"InferencePool llm-namespace/vllm-llama3-8b: its Endpoint Picker (spec.endpointPickerRef Service llm-namespace/non-existent-epp-svc port 9002) ` +
		`does not resolve: Service llm-namespace/non-existent-epp-svc not found"; `
	if route != want {
		t.Errorf("route conditions:\n got %s\nwant %s", route, want)
	}
	if got := shortConditions(p.poolStatus(seed.Namespace, seed.PoolName)[0].Conditions); got != "Accepted=True (Accepted); ResolvedRefs=False (InvalidExtensionRef)" {
		t.Errorf("pool conditions = %s", got)
	}
	backend := func() model.Backend {
		gw := p.out.Models.GetKey(seed.GatewayNamespace + "/" + seed.GatewayName)
		if gw == nil || len(gw.Listeners) == 0 || len(gw.Listeners[0].Routes) != 1 {
			return model.Backend{Invalid: "no route in the translator's view"}
		}
		return gw.Listeners[0].Routes[0].Rules[0].Backends[0]
	}
	if b := backend(); b.Pool != nil || !strings.Contains(b.Invalid, "non-existent-epp-svc not found") {
		t.Errorf("translator backend = %+v, want invalid with the reason", b)
	}
	svc := seed.EPPService()
	svc.Name = "non-existent-epp-svc"
	p.add(svc)
	p.eventually("resolved once the EPP Service exists", func() bool {
		rs := p.routeStatus(seed.Namespace, seed.RouteName)
		ps := p.poolStatus(seed.Namespace, seed.PoolName)
		return len(rs) == 1 && rs[0].Conditions[1].Reason == "ResolvedRefs" && len(ps) == 1 && ps[0].Conditions[1].Reason == "ResolvedRefs" &&
			backend().Pool != nil && backend().Pool.EPP != nil
	}, func() string { return conditionsOf(p.routeStatus(seed.Namespace, seed.RouteName)[0].Conditions) })
}

func TestInferenceDisabled(t *testing.T) {
	p := newPipeline(t, false, seedObjects()...)
	if p.out.PoolStatuses != nil || p.out.ShadowServices != nil || p.out.GatewayParents != nil {
		t.Fatal("pool collections built with the inference extension off")
	}
	p.eventually("route status", func() bool { return len(p.routeStatus(seed.Namespace, seed.RouteName)) == 1 }, nil)
	c := p.routeStatus(seed.Namespace, seed.RouteName)[0].Conditions[1]
	if c.Type != "ResolvedRefs" || c.Status != metav1.ConditionFalse || c.Reason != "InvalidKind" || c.Message != InferencePoolNotEnabledMessage {
		t.Errorf("ResolvedRefs = %+v, want False/InvalidKind with the not-enabled message", c)
	}
}

func TestRouteBeforePoolRecovers(t *testing.T) {
	p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), seed.HTTPRoute(), seed.EPPService())
	p.eventually("BackendNotFound", func() bool {
		rs := p.routeStatus(seed.Namespace, seed.RouteName)
		return len(rs) == 1 && rs[0].Conditions[1].Reason == "BackendNotFound"
	}, func() string { return fmt.Sprint(p.routeStatus(seed.Namespace, seed.RouteName)) })
	p.add(seed.InferencePool())
	p.eventually("ResolvedRefs after the pool appears", func() bool {
		rs := p.routeStatus(seed.Namespace, seed.RouteName)
		return len(rs) == 1 && rs[0].Conditions[1].Reason == "ResolvedRefs" &&
			p.out.ShadowServices.GetKey(seed.Namespace+"/"+ShadowServiceName(seed.PoolName)) != nil
	}, func() string { return conditionsOf(p.routeStatus(seed.Namespace, seed.RouteName)[0].Conditions) })
}

func TestCrossNamespacePoolNeedsReferenceGrant(t *testing.T) {
	route := seed.HTTPRoute()
	route.Namespace = "apps"
	route.Spec.Rules[0].BackendRefs[0].Namespace = ptr.To(gwv1.Namespace(seed.Namespace))
	p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), route, seed.InferencePool(), seed.EPPService())
	p.eventually("RefNotPermitted", func() bool {
		rs := p.routeStatus("apps", seed.RouteName)
		return len(rs) == 1 && rs[0].Conditions[1].Reason == "RefNotPermitted"
	}, nil)
	marker(p)
	if got := p.poolStatus(seed.Namespace, seed.PoolName); got != nil {
		t.Errorf("a reference without a ReferenceGrant made the pool's status: %+v", got)
	}
	p.add(&gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "allow-apps"},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Namespace: "apps"}},
			To:   []gwv1.ReferenceGrantTo{{Group: "inference.networking.k8s.io", Kind: "InferencePool"}},
		},
	})
	p.eventually("pool status after the grant", func() bool { return len(p.poolStatus(seed.Namespace, seed.PoolName)) == 1 }, nil)
}

func TestRouteDeleteRemovesPoolState(t *testing.T) {
	p := newPipeline(t, true, seedObjects()...)
	key := seed.Namespace + "/" + ShadowServiceName(seed.PoolName)
	p.eventually("shadow Service", func() bool { return p.out.ShadowServices.GetKey(key) != nil }, nil)
	p.http.DeleteObject(seed.Namespace + "/" + seed.RouteName)
	p.eventually("no shadow Service, no status, no route status", func() bool {
		return p.out.ShadowServices.GetKey(key) == nil && p.poolStatus(seed.Namespace, seed.PoolName) == nil &&
			p.routeStatus(seed.Namespace, seed.RouteName) == nil
	}, nil)
}

func TestHTTPRouteNotAcceptedReason(t *testing.T) {
	gw := seed.Gateway()
	gw.Spec.Listeners[0].AllowedRoutes = nil // From Same: llm-namespace is not allowed
	p := newPipeline(t, true, seed.GatewayClassObject(), gw, seed.HTTPRoute(), seed.InferencePool(), seed.EPPService())
	p.eventually("status", func() bool { return len(p.poolStatus(seed.Namespace, seed.PoolName)) == 1 }, nil)
	c := p.poolStatus(seed.Namespace, seed.PoolName)[0].Conditions[0]
	if c.Reason != "HTTPRouteNotAccepted" || !strings.Contains(c.Message, "NotAllowedByListeners") ||
		!strings.Contains(c.Message, "llm-namespace/llm-route") {
		t.Errorf("Accepted = %+v, want HTTPRouteNotAccepted naming the route and NotAllowedByListeners", c)
	}
	if n := p.out.Models.GetKey(seed.GatewayNamespace + "/" + seed.GatewayName); n == nil || len(n.Listeners[0].Routes) != 0 {
		t.Errorf("a route that is not accepted reached the translator: %+v", n)
	}
	marker(p)
	if s := p.out.ShadowServices.GetKey(seed.Namespace + "/" + ShadowServiceName(seed.PoolName)); s != nil {
		t.Errorf("a shadow Service for a pool that no Gateway accepts: %s", s.ResourceName())
	}
}

// The seed pool behind the seed HTTPRoute and a GRPCRoute. Its appProtocol
// is unset (HTTP/1.1): the GRPCRoute's backendRef is ResolvedRefs=False /
// UnsupportedProtocol naming the pool and reaches the translator as
// invalid, the HTTPRoute's is resolved, and the pool keeps its parent.
// Once the pool says kubernetes.io/h2c, both are resolved.
func TestGRPCRouteToPool(t *testing.T) {
	grpc := &gwv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "grpc"},
		Spec: gwv1.GRPCRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: seed.HTTPRoute().Spec.ParentRefs},
			Rules:           []gwv1.GRPCRouteRule{{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: seed.HTTPRoute().Spec.Rules[0].BackendRefs[0].BackendRef}}}},
		},
	}
	p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), seed.HTTPRoute(), grpc, seed.InferencePool(), seed.EPPService())
	p.eventually("pool status", func() bool { return len(p.poolStatus(seed.Namespace, seed.PoolName)) == 1 }, nil)
	grpcRefs := func() *metav1.Condition {
		if s := p.out.GRPCRouteStatuses.GetKey(seed.Namespace + "/grpc"); s != nil && len(s.Parents) == 1 {
			return meta.FindStatusCondition(s.Parents[0].Conditions, string(gwv1.RouteConditionResolvedRefs))
		}
		return nil
	}
	p.eventually("GRPCRoute ResolvedRefs=False", func() bool { c := grpcRefs(); return c != nil && c.Status == metav1.ConditionFalse }, nil)
	if c := grpcRefs(); c.Reason != string(gwv1.RouteReasonUnsupportedProtocol) ||
		!strings.Contains(c.Message, "InferencePool llm-namespace/vllm-llama3-8b") || !strings.Contains(c.Message, `"kubernetes.io/h2c"`) {
		t.Errorf("GRPCRoute ResolvedRefs = %+v, want UnsupportedProtocol naming the pool and kubernetes.io/h2c", c)
	}
	p.eventually("HTTPRoute ResolvedRefs=True", func() bool {
		ps := p.routeStatus(seed.Namespace, seed.RouteName)
		return len(ps) == 1 && meta.IsStatusConditionTrue(ps[0].Conditions, string(gwv1.RouteConditionResolvedRefs))
	}, func() string { return fmt.Sprint(p.routeStatus(seed.Namespace, seed.RouteName)) })
	backends := func() map[string]model.Backend {
		out := map[string]model.Backend{}
		if n := p.out.Models.GetKey(seed.GatewayNamespace + "/" + seed.GatewayName); n != nil {
			for _, r := range n.Listeners[0].Routes {
				out[r.Kind] = r.Rules[0].Backends[0]
			}
		}
		return out
	}
	p.eventually("both routes translated", func() bool { return len(backends()) == 2 }, nil)
	if b := backends(); b["GRPCRoute"].Invalid == "" || b["GRPCRoute"].Pool != nil || b["HTTPRoute"].Pool == nil {
		t.Errorf("translator backends = %+v, want the GRPCRoute's invalid and the HTTPRoute's the pool", b)
	}

	h2c := seed.InferencePool()
	h2c.Spec.AppProtocol = inferencev1.AppProtocolH2C
	p.add(h2c)
	p.eventually("GRPCRoute ResolvedRefs=True with an h2c pool", func() bool { c := grpcRefs(); return c != nil && c.Status == metav1.ConditionTrue }, nil)
	p.eventually("GRPCRoute's backend is the pool", func() bool { b := backends(); return b["GRPCRoute"].Pool != nil && b["GRPCRoute"].Pool.HTTP2() }, nil)
}

func TestShadowServiceOwnerReference(t *testing.T) {
	pool := seed.InferencePool()
	pool.UID = "uid-1"
	p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), seed.HTTPRoute(), pool, seed.EPPService())
	key := seed.Namespace + "/" + ShadowServiceName(seed.PoolName)
	p.eventually("shadow Service", func() bool { return p.out.ShadowServices.GetKey(key) != nil }, nil)
	got := p.out.ShadowServices.GetKey(key).Apply.OwnerReferences
	if len(got) != 1 || *got[0].Kind != "InferencePool" || *got[0].Name != seed.PoolName || *got[0].UID != "uid-1" {
		t.Errorf("owner references = %+v", got)
	}
}

// A RequestMirror to a Service in another namespace needs a ReferenceGrant:
// without one the route says RefNotPermitted and the translator never sees
// the mirror; the rest of the rule is kept.
func TestMirrorNeedsReferenceGrant(t *testing.T) {
	route := seed.HTTPRoute()
	route.Spec.Rules[0].Filters = []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestMirror,
		RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{
			Name: "shadow-traffic", Namespace: ptr.To(gwv1.Namespace("audit")), Port: ptr.To(gwv1.PortNumber(80))}}}}
	target := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "audit", Name: "shadow-traffic"}}
	p := newPipeline(t, true, seed.GatewayClassObject(), seed.Gateway(), route, seed.InferencePool(), seed.EPPService(), target)
	p.eventually("RefNotPermitted for the mirror", func() bool {
		rs := p.routeStatus(seed.Namespace, seed.RouteName)
		return len(rs) == 1 && rs[0].Conditions[1].Reason == "RefNotPermitted"
	}, func() string { return fmt.Sprint(p.routeStatus(seed.Namespace, seed.RouteName)) })
	mirrors := func() int {
		gw := p.out.Models.GetKey(seed.GatewayNamespace + "/" + seed.GatewayName)
		if gw == nil || len(gw.Listeners[0].Routes) != 1 {
			return -1
		}
		return len(gw.Listeners[0].Routes[0].Rules[0].HTTP.Filters)
	}
	if n := mirrors(); n != 0 {
		t.Fatalf("translator rule has %d filters, want the refused mirror dropped", n)
	}
	p.add(&gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "audit", Name: "allow-mirror"},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Namespace: seed.Namespace}},
			To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	})
	p.eventually("the mirror allowed", func() bool {
		rs := p.routeStatus(seed.Namespace, seed.RouteName)
		return len(rs) == 1 && rs[0].Conditions[1].Reason == "ResolvedRefs" && mirrors() == 1
	}, nil)
	if route.Spec.Rules[0].Filters == nil || len(route.Spec.Rules[0].Filters) != 1 {
		t.Error("the informer's route object was modified")
	}
}

// TestTranslatorKeepsUnchangedRoutes: after one route of a Gateway changes,
// the Models collection's next model.Gateway holds a new *model.Route for it and
// the same pointer for every other route, so downstream comparisons stop at
// them (routeModel); a change of what a route resolves to (its backend
// Service going away) gives that route a new one too.
func TestTranslatorKeepsUnchangedRoutes(t *testing.T) {
	objs := []any{seed.GatewayClassObject(), seed.EPPService(), benchGateway(0)}
	for j := range 3 {
		objs = append(objs, benchRoute(0, j, "/"))
	}
	p := newPipeline(t, false, objs...)
	key := seed.GatewayNamespace + "/gw-0"
	routes := func() map[string]*model.Route {
		out := map[string]*model.Route{}
		if gw := p.out.Models.GetKey(key); gw != nil && len(gw.Listeners) == 1 {
			for _, r := range gw.Listeners[0].Routes {
				out[r.Name] = r
			}
		}
		return out
	}
	describe := func() string { return fmt.Sprint(p.out.Models.GetKey(key)) }
	p.eventually("three routes in the model", func() bool { return len(routes()) == 3 }, describe)
	before := routes()

	r := benchRoute(0, 1, "/v1")
	r.Generation = 2
	p.add(r)
	p.eventually("r-0-1's new path in the model", func() bool {
		gw := p.out.Models.GetKey(key)
		return gw != nil && routePath(gw, "r-0-1") == "/v1"
	}, describe)
	after := routes()
	for _, name := range []string{"r-0-0", "r-0-2"} {
		if after[name] != before[name] {
			t.Errorf("%s: a new *model.Route after another route changed", name)
		}
	}
	if after["r-0-1"] == before["r-0-1"] {
		t.Error("r-0-1: the same *model.Route after its rule changed")
	}

	// The backend Service goes: every route's backend no longer resolves.
	p.services.DeleteObject(seed.Namespace + "/" + seed.EPPName)
	p.eventually("invalid backends in the model", func() bool {
		rs := routes()
		for _, r := range rs {
			if len(r.Rules) == 0 || len(r.Rules[0].Backends) == 0 || r.Rules[0].Backends[0].Invalid == "" {
				return false
			}
		}
		return len(rs) == 3
	}, describe)
	gone := routes()
	for name, r := range gone {
		if r == after[name] {
			t.Errorf("%s: the same *model.Route after its backend Service went away", name)
		}
	}

	// The model equals one built from scratch from the routes' results.
	gw := p.out.Gateways.GetKey(key)
	want := TranslatorGateway(*gw, p.out.Routes.List())
	if d := cmp.Diff(want, p.out.Models.GetKey(key)); d != "" {
		t.Errorf("Models differs from TranslatorGateway over the routes (-want +got):\n%s", d)
	}
}

// TestTranslatorRouteOrder: the Translator's routes come in the model's
// order (model.CompareRoutes: kind, namespace, name), not in the order of
// their "kind/namespace/name" keys, which differ for namespaces "team-a"
// and "team" ('-' sorts before '/').
func TestTranslatorRouteOrder(t *testing.T) {
	objs := []any{seed.GatewayClassObject(), benchGateway(0)}
	for _, ns := range []string{"team-a", "team", "team.b"} {
		r := benchRoute(0, 0, "/")
		r.Namespace = ns
		objs = append(objs, r)
	}
	p := newPipeline(t, false, objs...)
	key := seed.GatewayNamespace + "/gw-0"
	var got []string
	p.eventually("three routes in the model", func() bool {
		got = nil
		if gw := p.out.Models.GetKey(key); gw != nil && len(gw.Listeners) == 1 {
			for _, r := range gw.Listeners[0].Routes {
				got = append(got, r.Namespace)
			}
		}
		return len(got) == 3
	}, func() string { return fmt.Sprint(got) })
	if want := []string{"team", "team-a", "team.b"}; !slices.Equal(got, want) {
		t.Errorf("route namespaces in order %q, want %q", got, want)
	}
}
