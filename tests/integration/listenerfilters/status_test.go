// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package listenerfilters_test runs the controller against a real API
// server with the Gateway API experimental CRDs (Listener.filters,
// GEP-5224) and the chart's infermesh.io ExternalProcessor CRD, and checks
// the listener status every refusal of the spec gives, and the refusals
// the API server makes itself (CEL).
package listenerfilters_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	"github.com/infermesh/infermesh/pkg/test/controller"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

const (
	ns   = "lf"
	wait = 60 * time.Second
	// processorCRD is the chart's CRD, which the test installs as the
	// chart does.
	processorCRD = "../../../manifests/charts/infermesh/crds/infermesh.io_externalprocessors.yaml"
)

func processor(name, svc string, port int64, mode map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"backendRef": map[string]any{"name": svc, "port": port}}
	if mode != nil {
		spec["processingMode"] = mode
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": imv1alpha1.SchemeGroupVersion.String(), "kind": imv1alpha1.ExternalProcessorKind,
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec,
	}}
}

func extRef(group, kind, name string) gwv1.ListenerFilter {
	return gwv1.ListenerFilter{Type: gwv1.ListenerFilterExtensionRef,
		ExtensionRef: &gwv1.LocalObjectReference{Group: gwv1.Group(group), Kind: gwv1.Kind(kind), Name: gwv1.ObjectName(name)}}
}

func listener(name string, filters ...gwv1.ListenerFilter) gwv1.Listener {
	return gwv1.Listener{Name: gwv1.SectionName(name), Port: 80, Protocol: gwv1.HTTPProtocolType,
		Hostname: ptr.To(gwv1.Hostname(name + ".example.com")), Filters: &gwv1.ListenerFilters{Requests: filters}}
}

// until polls f until it returns nil, failing the test with its last
// error after wait.
func until(t *testing.T, f func() error) {
	t.Helper()
	var last error
	poll.UntilOr(t, wait, "listener status", func() bool { last = f(); return last == nil },
		func() string { return fmt.Sprint(last) })
}

func conds(cs []metav1.Condition) string {
	var out []string
	for _, c := range cs {
		if c.Type == "Accepted" || c.Type == "ResolvedRefs" {
			out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
	}
	return strings.Join(out, " ")
}

// TestListenerFilterStatus: on a real API server, a listener filter that
// resolves is Accepted and ResolvedRefs; an ExtensionRef to an unknown
// kind or a missing object is ResolvedRefs=False/InvalidListenerFilterRef
// with the filter's index in the message; ExternalAuth as a listener
// filter is Accepted=False/UnsupportedValue; a ListenerSet's listener gets
// the same; the API server itself refuses filters on a TCP listener and an
// ExternalProcessor whose streamed body skips its headers. A processor
// created after its listener makes the listener resolve. Each processor's
// own status says whether its Service port resolves (BackendNotFound
// naming what is missing, until it appears).
func TestListenerFilterStatus(t *testing.T) {
	crds, err := kubeenv.GatewayAPIExperimentalCRDs()
	if err != nil {
		t.Fatal(err)
	}
	env := kubeenv.Start(t, kubeenv.WithCRDs(append(crds, processorCRD)...))
	controller.Start(t, env.RESTConfig(), nil)
	cfg := env.RESTConfig()
	kube := kubernetes.NewForConfigOrDie(cfg)
	gw := gatewayclient.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := t.Context()

	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bbr"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "grpc", Port: 9004}}}}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eps := dyn.Resource(imv1alpha1.ExternalProcessorsGVR).Namespace(ns)
	streamed := map[string]any{"requestBody": "FullDuplexStreamed"}
	if _, err := eps.Create(ctx, processor("bbr", "bbr", 9004, streamed), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The CRD's CEL rule: a streamed body needs its headers sent.
	_, err = eps.Create(ctx, processor("bad", "bbr", 9004, map[string]any{"requestHeaders": "Skip", "requestBody": "FullDuplexStreamed"}), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "requestBody FullDuplexStreamed needs requestHeaders Send") {
		t.Errorf("ExternalProcessor with a streamed body and skipped headers: %v, want Invalid", err)
	}

	if _, err := gw.GatewayV1().GatewayClasses().Create(ctx, seed.GatewayClassObject(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ours := imv1alpha1.GroupName
	authz := gwv1.ListenerFilter{Type: gwv1.ListenerFilterExternalAuth, ExternalAuth: &gwv1.HTTPExternalAuthFilter{
		ExternalAuthProtocol: gwv1.HTTPRouteExternalAuthGRPCProtocol, GRPCAuthConfig: &gwv1.GRPCAuthConfig{},
		BackendRef: gwv1.BackendObjectReference{Name: "authz", Port: ptr.To(gwv1.PortNumber(9000))}}}
	g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: seed.GatewayClass,
		AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}},
		Listeners: []gwv1.Listener{
			listener("ok", extRef(ours, imv1alpha1.ExternalProcessorKind, "bbr")),
			listener("kind", extRef("example.com", "BodyRouter", "bbr")),
			listener("missing", extRef(ours, imv1alpha1.ExternalProcessorKind, "bbr"), extRef(ours, imv1alpha1.ExternalProcessorKind, "later")),
			listener("authz", authz),
		}}}
	if _, err := gw.GatewayV1().Gateways(ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ls := &gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "set"}, Spec: gwv1.ListenerSetSpec{
		ParentRef: gwv1.ParentGatewayReference{Name: "gw"},
		Listeners: []gwv1.ListenerEntry{
			{Name: "set-ok", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("set-ok.example.com")),
				Filters: &gwv1.ListenerFilters{Requests: []gwv1.ListenerFilter{extRef(ours, imv1alpha1.ExternalProcessorKind, "bbr")}}},
			{Name: "set-kind", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname("set-kind.example.com")),
				Filters: &gwv1.ListenerFilters{Requests: []gwv1.ListenerFilter{extRef("example.com", "BodyRouter", "bbr")}}},
		}}}
	if _, err := gw.GatewayV1().ListenerSets(ns).Create(ctx, ls, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	want := map[gwv1.SectionName]struct{ conds, msg string }{
		"ok":      {"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs", ""},
		"kind":    {"Accepted=True/Accepted ResolvedRefs=False/InvalidListenerFilterRef", "filters.requests[0]: extensionRef kind BodyRouter"},
		"missing": {"Accepted=True/Accepted ResolvedRefs=False/InvalidListenerFilterRef", "filters.requests[1]: ExternalProcessor lf/later not found"},
		"authz":   {"Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs", "filters.requests[0]: type ExternalAuth"},
	}
	type entry struct {
		Name       gwv1.SectionName
		Conditions []metav1.Condition
	}
	check := func(name string, got []entry, want map[gwv1.SectionName]struct{ conds, msg string }) error {
		if len(got) != len(want) {
			return fmt.Errorf("%s: %d listener statuses, want %d", name, len(got), len(want))
		}
		for _, l := range got {
			w := want[l.Name]
			if c := conds(l.Conditions); c != w.conds {
				return fmt.Errorf("%s listener %s: %s, want %s", name, l.Name, c, w.conds)
			}
			found := w.msg == ""
			for _, c := range l.Conditions {
				found = found || (c.Status == metav1.ConditionFalse && strings.Contains(c.Message, w.msg))
			}
			if !found {
				return fmt.Errorf("%s listener %s: no False condition says %q: %v", name, l.Name, w.msg, l.Conditions)
			}
		}
		return nil
	}
	until(t, func() error {
		got, err := gw.GatewayV1().Gateways(ns).Get(ctx, "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var entries []entry
		for _, l := range got.Status.Listeners {
			entries = append(entries, entry{l.Name, l.Conditions})
		}
		return check("Gateway", entries, want)
	})
	until(t, func() error {
		got, err := gw.GatewayV1().ListenerSets(ns).Get(ctx, "set", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var entries []entry
		for _, l := range got.Status.Listeners {
			entries = append(entries, entry{l.Name, l.Conditions})
		}
		return check("ListenerSet", entries, map[gwv1.SectionName]struct{ conds, msg string }{
			"set-ok":   {"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs", ""},
			"set-kind": {"Accepted=True/Accepted ResolvedRefs=False/InvalidListenerFilterRef", "filters.requests[0]: extensionRef kind BodyRouter"},
		})
	})

	// The processor the listener waits for appears: it resolves.
	if _, err := eps.Create(ctx, processor("later", "bbr", 9004, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want["missing"] = struct{ conds, msg string }{"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs", ""}
	until(t, func() error {
		got, err := gw.GatewayV1().Gateways(ns).Get(ctx, "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var entries []entry
		for _, l := range got.Status.Listeners {
			entries = append(entries, entry{l.Name, l.Conditions})
		}
		return check("Gateway", entries, want)
	})

	// The processors' own status: Accepted and ResolvedRefs, at their
	// generation; a Service that does not exist, or lacks the port, is
	// ResolvedRefs=False/BackendNotFound naming it, until it appears.
	if _, err := eps.Create(ctx, processor("nosvc", "gone", 9004, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := eps.Create(ctx, processor("badport", "bbr", 1234, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	processorStatus := func(name, wantConds, wantMsg string) func() error {
		return func() error {
			u, err := eps.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var ep imv1alpha1.ExternalProcessor
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ep); err != nil {
				return err
			}
			if c := conds(ep.Status.Conditions); c != wantConds {
				return fmt.Errorf("ExternalProcessor %s: %s, want %s", name, c, wantConds)
			}
			for _, c := range ep.Status.Conditions {
				if c.ObservedGeneration != ep.Generation {
					return fmt.Errorf("ExternalProcessor %s: %s observedGeneration %d, generation %d", name, c.Type, c.ObservedGeneration, ep.Generation)
				}
				if c.Status == metav1.ConditionFalse && !strings.Contains(c.Message, wantMsg) {
					return fmt.Errorf("ExternalProcessor %s: %s message %q does not say %q", name, c.Type, c.Message, wantMsg)
				}
			}
			return nil
		}
	}
	until(t, processorStatus("bbr", "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs", ""))
	until(t, processorStatus("nosvc", "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound", "lf/gone"))
	until(t, processorStatus("badport", "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound", "1234"))
	gone := svc.DeepCopy()
	gone.Name, gone.ResourceVersion = "gone", ""
	if _, err := kube.CoreV1().Services(ns).Create(ctx, gone, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, processorStatus("nosvc", "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs", ""))

	// GEP-5224's CEL rule: filters only on HTTP and HTTPS listeners.
	tcp := g.DeepCopy()
	tcp.Name, tcp.ResourceVersion = "tcp", ""
	tcp.Spec.Listeners = []gwv1.Listener{{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType,
		Filters: &gwv1.ListenerFilters{Requests: []gwv1.ListenerFilter{extRef(ours, imv1alpha1.ExternalProcessorKind, "bbr")}}}}
	if _, err := gw.GatewayV1().Gateways(ns).Create(ctx, tcp, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a TCP listener with filters: %v, want Invalid from the API server", err)
	}
}
