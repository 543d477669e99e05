// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package gateway_test runs the Gateway API and InferencePool controller
// (pilot/pkg/config/kube/gateway) in process against a real cluster
// (pkg/test/kubeenv): the seed's shadow Service and pool status as a
// cluster shows them, a pool whose Endpoint Picker does not resolve, a
// foreign Service holding a shadow Service's name, and the extension off.
package gateway_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/test/controller"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

const (
	otherController = "example.com/other-controller"
	shadowName      = "vllm-llama3-8b-ip-22dc7de1"
	wait            = 30 * time.Second
)

// clients are the admin's clients: what a user does with kubectl.
type clients struct {
	kube    kubernetes.Interface
	gateway gatewayclient.Interface
	pools   inferenceclient.Interface
}

func newClients(env *kubeenv.Env) clients {
	cfg := env.RESTConfig()
	return clients{
		kube:    kubernetes.NewForConfigOrDie(cfg),
		gateway: gatewayclient.NewForConfigOrDie(cfg),
		pools:   inferenceclient.NewForConfigOrDie(cfg),
	}
}

func startController(t *testing.T, env *kubeenv.Env, flags map[string]string) {
	t.Helper()
	controller.Start(t, env.RESTConfig(), flags)
}

// applySeed creates the namespaces and the seed's objects the controller
// reads: the EPP Service, the InferencePool, the HTTPRoute and the Gateway.
func applySeed(t *testing.T, c clients) {
	t.Helper()
	ctx := t.Context()
	for _, ns := range []string{seed.Namespace, seed.GatewayNamespace} {
		if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.kube.CoreV1().Services(seed.Namespace).Create(ctx, seed.EPPService(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.pools.InferenceV1().InferencePools(seed.Namespace).Create(ctx, seed.InferencePool(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.gateway.GatewayV1().HTTPRoutes(seed.Namespace).Create(ctx, seed.HTTPRoute(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.gateway.GatewayV1().Gateways(seed.GatewayNamespace).Create(ctx, seed.Gateway(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c clients) pool(t *testing.T) *inferencev1.InferencePool {
	t.Helper()
	p, err := c.pools.InferenceV1().InferencePools(seed.Namespace).Get(t.Context(), seed.PoolName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (c clients) shadow(t *testing.T) (*corev1.Service, bool) {
	t.Helper()
	s, err := c.kube.CoreV1().Services(seed.Namespace).Get(t.Context(), shadowName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, true
}

func conditions(conds []metav1.Condition) string {
	parts := make([]string, len(conds))
	for i, c := range conds {
		parts[i] = fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
	}
	return strings.Join(parts, "; ")
}

// writesBy counts the write requests our controller made, by resource.
func writesBy(t *testing.T, env *kubeenv.Env) map[string]int {
	t.Helper()
	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range events {
		if e.UserAgent == controller.UserAgent && e.IsWrite() && e.Stage == "ResponseComplete" && e.Resource != "events" {
			out[e.Verb+" "+e.Resource+"/"+e.Subresource+" "+e.Namespace+"/"+e.Name]++
		}
	}
	return out
}

func TestSeedShadowServiceAndStatus(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	c := newClients(env)
	startController(t, env, map[string]string{"ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true"})
	applySeed(t, c)
	ctx := t.Context()

	// The seed's shadow Service: vllm-llama3-8b-ip-22dc7de1 ClusterIP None 54321/TCP.
	poll.Until(t, wait, "the shadow Service", func() bool { _, ok := c.shadow(t); return ok })
	svc, _ := c.shadow(t)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 54321 ||
		svc.Spec.Ports[0].Protocol != corev1.ProtocolTCP || svc.Spec.Ports[0].TargetPort.IntValue() != 8000 {
		t.Errorf("shadow Service spec = %+v, want headless 54321/TCP -> 8000", svc.Spec)
	}
	wantLabels := map[string]string{
		"istio.io/inferencepool-name": seed.PoolName, "istio.io/inferencepool-extension-service": seed.EPPName,
		"istio.io/inferencepool-extension-port": "9002", "istio.io/inferencepool-extension-failure-mode": "FailOpen",
		"internal.istio.io/service-semantics": "inferencepool",
	}
	for k, v := range wantLabels {
		if svc.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, svc.Labels[k], v)
		}
	}
	pool := c.pool(t)
	if len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].UID != pool.UID {
		t.Errorf("owner references = %+v, want the pool (uid %s)", svc.OwnerReferences, pool.UID)
	}

	// The seed's pool status: Accepted=True (Accepted), ResolvedRefs=True (ResolvedRefs).
	want := "Accepted=True (Accepted); ResolvedRefs=True (ResolvedRefs)"
	poll.UntilOr(t, wait, "the pool's status", func() bool {
		p := c.pool(t)
		return len(p.Status.Parents) == 1 && conditions(p.Status.Parents[0].Conditions) == want
	}, func() string { return fmt.Sprintf("%+v", c.pool(t).Status) })
	ps := c.pool(t).Status.Parents[0]
	if g := ps.ParentRef.Group; g == nil || *g != "gateway.networking.k8s.io" || ps.ParentRef.Kind != "Gateway" ||
		ps.ParentRef.Namespace != seed.GatewayNamespace || ps.ParentRef.Name != seed.GatewayName {
		t.Errorf("parentRef = %+v", ps.ParentRef)
	}
	for _, cond := range ps.Conditions {
		if cond.ObservedGeneration != pool.Generation || cond.LastTransitionTime.IsZero() {
			t.Errorf("condition %s: observedGeneration %d (pool %d), lastTransitionTime %v", cond.Type,
				cond.ObservedGeneration, pool.Generation, cond.LastTransitionTime)
		}
	}

	// The route, the Gateway and the default class we created.
	poll.Until(t, wait, "the route's status", func() bool {
		r, err := c.gateway.GatewayV1().HTTPRoutes(seed.Namespace).Get(ctx, seed.RouteName, metav1.GetOptions{})
		return err == nil && len(r.Status.Parents) == 1 && conditions(r.Status.Parents[0].Conditions) == want
	})
	// Programmed follows the Gateway's own Service, which the deployment
	// controller creates after the first status write; the quiet window
	// below must start after that second write. With no load-balancer
	// controller in this cluster the LoadBalancer Service never gets an
	// address: the listener is programmed, the Gateway waits for its
	// address (as Istio reports it on a cluster without one).
	poll.UntilOr(t, wait, "the Gateway's status: one attached route, listener programmed, address pending", func() bool {
		g, err := c.gateway.GatewayV1().Gateways(seed.GatewayNamespace).Get(ctx, seed.GatewayName, metav1.GetOptions{})
		return err == nil && len(g.Status.Listeners) == 1 && g.Status.Listeners[0].AttachedRoutes == 1 &&
			strings.HasSuffix(conditions(g.Status.Listeners[0].Conditions), "; Programmed=True (Programmed)") &&
			conditions(g.Status.Conditions) == "Accepted=True (Accepted); Programmed=False (AddressNotAssigned)"
	}, func() string {
		g, err := c.gateway.GatewayV1().Gateways(seed.GatewayNamespace).Get(ctx, seed.GatewayName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%+v", g.Status)
	})
	poll.Until(t, wait, "the default GatewayClass, accepted", func() bool {
		gc, err := c.gateway.GatewayV1().GatewayClasses().Get(ctx, "istio", metav1.GetOptions{})
		return err == nil && gc.Spec.ControllerName == "istio.io/gateway-controller" &&
			conditions(gc.Status.Conditions) == "Accepted=True (Accepted)" &&
			reflect.DeepEqual(gc.Status.SupportedFeatures, gateway.SupportedFeatures)
	})

	t.Run("recompute without changes writes nothing", func(t *testing.T) {
		before := writesBy(t, env)
		if len(before) == 0 {
			t.Fatal("no write by the controller in the audit log: a count of zero later would prove nothing")
		}
		// A label on the pool: every pool collection recomputes, nothing
		// desired changes.
		p := c.pool(t)
		p.Labels = map[string]string{"touched": "yes"}
		if _, err := c.pools.InferenceV1().InferencePools(seed.Namespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Absence of writes needs a window; the controller reacts within
		// milliseconds.
		time.Sleep(2 * time.Second)
		after := writesBy(t, env)
		for k, n := range after {
			if n != before[k] {
				t.Errorf("%s: %d writes after an unchanged recompute (was %d)", k, n, before[k])
			}
		}
	})

	t.Run("target ports change and the Service follows", func(t *testing.T) {
		p := c.pool(t)
		p.Spec.TargetPorts = []inferencev1.Port{{Number: 8000}, {Number: 8001}, {Number: 8002}}
		if _, err := c.pools.InferenceV1().InferencePools(seed.Namespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, wait, "three ports 54321-54323", func() bool {
			s, ok := c.shadow(t)
			if !ok || len(s.Spec.Ports) != 3 {
				return false
			}
			for i, port := range s.Spec.Ports {
				if port.Port != int32(54321+i) || port.TargetPort.IntValue() != 8000+i || port.Name != fmt.Sprintf("http-%d", i) {
					return false
				}
			}
			return true
		})
	})

	t.Run("deleted shadow Service is recreated", func(t *testing.T) {
		s, _ := c.shadow(t)
		if err := c.kube.CoreV1().Services(seed.Namespace).Delete(ctx, shadowName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, wait, "a new shadow Service", func() bool {
			n, ok := c.shadow(t)
			return ok && n.UID != s.UID
		})
	})

	t.Run("route deleted: our entry goes, another controller's stays", func(t *testing.T) {
		p := c.pool(t)
		other := inferencev1.ParentStatus{
			ParentRef:      inferencev1.ParentReference{Group: ptrTo(inferencev1.Group("gateway.networking.k8s.io")), Kind: "Gateway", Namespace: "elsewhere", Name: "their-gateway"},
			ControllerName: otherController,
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted",
				Message: "theirs", LastTransitionTime: metav1.Now(), ObservedGeneration: p.Generation}},
		}
		p.Status.Parents = append(p.Status.Parents, other)
		if _, err := c.pools.InferenceV1().InferencePools(seed.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.gateway.GatewayV1().HTTPRoutes(seed.Namespace).Delete(ctx, seed.RouteName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.UntilOr(t, wait, "only the other controller's entry", func() bool {
			ps := c.pool(t).Status.Parents
			return len(ps) == 1 && ps[0].ControllerName == otherController
		}, func() string { return fmt.Sprintf("%+v", c.pool(t).Status.Parents) })
	})

	t.Run("pool deleted: the garbage collector removes the shadow Service", func(t *testing.T) {
		if err := c.pools.InferenceV1().InferencePools(seed.Namespace).Delete(ctx, seed.PoolName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, wait, "the shadow Service gone", func() bool { _, ok := c.shadow(t); return !ok })
	})
}

// routeConditions returns the route's conditions for our one parent, or nil.
func (c clients) routeConditions(t *testing.T, name string) []metav1.Condition {
	t.Helper()
	r, err := c.gateway.GatewayV1().HTTPRoutes(seed.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil || len(r.Status.Parents) != 1 {
		return nil
	}
	return r.Status.Parents[0].Conditions
}

// Status tells the truth: a route to a pool whose Endpoint
// Picker does not resolve stays Accepted=True and says
// ResolvedRefs=False/BackendNotFound naming the pool and its
// endpointPickerRef (GIE conformance InferencePoolInvalidEPPService and
// InferencePoolMissingEPPRef, against a real API server and the v1.6.0
// CRD); a pool that is not accepted gets no shadow Service; the route
// resolves once the EPP Service is created.
func TestPoolEndpointPickerNotResolved(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	c := newClients(env)
	startController(t, env, map[string]string{"ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true"})
	ctx := t.Context()
	for _, ns := range []string{seed.Namespace, seed.GatewayNamespace} {
		if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	invalid := seed.InferencePool()
	invalid.Name = "pool-with-invalid-epp"
	invalid.Spec.EndpointPickerRef = &inferencev1.EndpointPickerRef{Kind: "Service", Name: "non-existent-epp-svc", Port: &inferencev1.Port{Number: 9002}}
	missing := seed.InferencePool()
	missing.Name = "pool-with-missing-epp-ref"
	missing.Spec.EndpointPickerRef = nil
	for _, p := range []*inferencev1.InferencePool{missing, invalid} {
		if _, err := c.pools.InferenceV1().InferencePools(seed.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := seed.HTTPRoute()
		r.Name = "route-to-" + p.Name
		r.Spec.Rules[0].BackendRefs[0].Name = gwv1.ObjectName(p.Name)
		if _, err := c.gateway.GatewayV1().HTTPRoutes(seed.Namespace).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.gateway.GatewayV1().Gateways(seed.GatewayNamespace).Create(ctx, seed.Gateway(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	wantRoute := map[string]string{
		invalid.Name: "InferencePool llm-namespace/pool-with-invalid-epp: its Endpoint Picker (spec.endpointPickerRef Service " +
			"llm-namespace/non-existent-epp-svc port 9002) does not resolve: Service llm-namespace/non-existent-epp-svc not found",
		missing.Name: "InferencePool llm-namespace/pool-with-missing-epp-ref has no Endpoint Picker: spec.endpointPickerRef is not set, " +
			"and this implementation sends a pool's requests only through its Endpoint Picker",
	}
	wantPool := map[string]string{
		invalid.Name: "Accepted=True (Accepted); ResolvedRefs=False (InvalidExtensionRef)",
		missing.Name: "Accepted=False (EndpointPickerRefMissing); ResolvedRefs=True (ResolvedRefs)",
	}
	for pool, msg := range wantRoute {
		route := "route-to-" + pool
		poll.UntilOr(t, wait, route+": Accepted=True, ResolvedRefs=False/BackendNotFound naming the pool", func() bool {
			cs := c.routeConditions(t, route)
			return conditions(cs) == "Accepted=True (Accepted); ResolvedRefs=False (BackendNotFound)" && cs[1].Message == msg
		}, func() string { return fmt.Sprintf("%+v", c.routeConditions(t, route)) })
		poll.UntilOr(t, wait, pool+": "+wantPool[pool], func() bool {
			p, err := c.pools.InferenceV1().InferencePools(seed.Namespace).Get(ctx, pool, metav1.GetOptions{})
			return err == nil && len(p.Status.Parents) == 1 && conditions(p.Status.Parents[0].Conditions) == wantPool[pool]
		}, func() string {
			p, _ := c.pools.InferenceV1().InferencePools(seed.Namespace).Get(ctx, pool, metav1.GetOptions{})
			return fmt.Sprintf("%+v", p.Status)
		})
	}
	// The accepted pool's shadow Service is written; by then the other
	// pool's would have been too, had it been desired.
	shadowOf := func(pool string) bool {
		_, err := c.kube.CoreV1().Services(seed.Namespace).Get(ctx, gateway.ShadowServiceName(pool), metav1.GetOptions{})
		return err == nil
	}
	poll.Until(t, wait, "the shadow Service of the accepted pool", func() bool { return shadowOf(invalid.Name) })
	time.Sleep(2 * time.Second)
	if shadowOf(missing.Name) {
		t.Errorf("a shadow Service for %s, which no Gateway accepts (EndpointPickerRefMissing)", missing.Name)
	}

	epp := seed.EPPService()
	epp.Name = "non-existent-epp-svc"
	if _, err := c.kube.CoreV1().Services(seed.Namespace).Create(ctx, epp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.UntilOr(t, wait, "the route resolved once the EPP Service exists", func() bool {
		return conditions(c.routeConditions(t, "route-to-"+invalid.Name)) == "Accepted=True (Accepted); ResolvedRefs=True (ResolvedRefs)"
	}, func() string { return fmt.Sprintf("%+v", c.routeConditions(t, "route-to-"+invalid.Name)) })
}

// A Service with the shadow Service's name that is not ours is never
// touched, and the pool gets a Warning event.
func TestForeignServiceWithShadowName(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	c := newClients(env)
	ctx := t.Context()
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: seed.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	theirs := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: shadowName, Labels: map[string]string{"team": "theirs"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	theirs, err := c.kube.CoreV1().Services(seed.Namespace).Create(ctx, theirs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startController(t, env, map[string]string{"ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true"})
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: seed.GatewayNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, create := range []func() error{
		func() error {
			_, err := c.kube.CoreV1().Services(seed.Namespace).Create(ctx, seed.EPPService(), metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.pools.InferenceV1().InferencePools(seed.Namespace).Create(ctx, seed.InferencePool(), metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.gateway.GatewayV1().HTTPRoutes(seed.Namespace).Create(ctx, seed.HTTPRoute(), metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.gateway.GatewayV1().Gateways(seed.GatewayNamespace).Create(ctx, seed.Gateway(), metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, wait, "a ShadowServiceNameTaken event on the pool", func() bool {
		evs, err := c.kube.CoreV1().Events(seed.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "ShadowServiceNameTaken" && e.InvolvedObject.Kind == "InferencePool" && e.InvolvedObject.Name == seed.PoolName &&
				e.Type == corev1.EventTypeWarning {
				return true
			}
		}
		return false
	})
	now, _ := c.shadow(t)
	if now.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("someone else's Service was written: resourceVersion %s -> %s", theirs.ResourceVersion, now.ResourceVersion)
	}
}

// With ENABLE_GATEWAY_API_INFERENCE_EXTENSION unset, the route to the pool
// gets the not-enabled message, no shadow Service appears, and no
// InferencePool informer runs.
func TestInferenceExtensionDisabled(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	c := newClients(env)
	startController(t, env, nil)
	applySeed(t, c)
	ctx := t.Context()
	poll.UntilOr(t, wait, "the not-enabled message on the route", func() bool {
		r, err := c.gateway.GatewayV1().HTTPRoutes(seed.Namespace).Get(ctx, seed.RouteName, metav1.GetOptions{})
		if err != nil || len(r.Status.Parents) != 1 {
			return false
		}
		for _, cond := range r.Status.Parents[0].Conditions {
			if cond.Type == "ResolvedRefs" && cond.Status == metav1.ConditionFalse && cond.Reason == "InvalidKind" &&
				cond.Message == "InferencePool is not enabled. To enable, set ENABLE_GATEWAY_API_INFERENCE_EXTENSION to true in istiod" {
				return true
			}
		}
		return false
	}, func() string {
		r, _ := c.gateway.GatewayV1().HTTPRoutes(seed.Namespace).Get(ctx, seed.RouteName, metav1.GetOptions{})
		return fmt.Sprintf("%+v", r.Status)
	})
	if _, ok := c.shadow(t); ok {
		t.Error("a shadow Service exists with the inference extension off")
	}
	if ps := c.pool(t).Status.Parents; len(ps) != 0 {
		t.Errorf("pool status written with the inference extension off: %+v", ps)
	}
	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	ours := 0
	for _, e := range events {
		if e.UserAgent != controller.UserAgent {
			continue
		}
		ours++
		if e.Resource == "inferencepools" {
			t.Errorf("the controller read InferencePools with the extension off: %s %s", e.Verb, e.RequestURI)
		}
	}
	if ours == 0 {
		t.Fatal("no request by the controller in the audit log")
	}
}

func ptrTo[T any](v T) *T { return &v }
