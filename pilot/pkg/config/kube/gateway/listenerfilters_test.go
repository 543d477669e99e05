// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

func extProcessor(ns, name, svc string, port int32, mutate func(*imv1alpha1.ExternalProcessorSpec)) *imv1alpha1.ExternalProcessor {
	ep := &imv1alpha1.ExternalProcessor{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: imv1alpha1.ExternalProcessorSpec{BackendRef: imv1alpha1.ServiceReference{Name: svc, Port: port}}}
	if mutate != nil {
		mutate(&ep.Spec)
	}
	return ep
}

// filterLookups serve the ExternalProcessors eps and the Services svcs
// (namespace/name → ports).
func filterLookups(eps []*imv1alpha1.ExternalProcessor, svcs map[string][]int32) *ListenerFilterLookups {
	return &ListenerFilterLookups{
		ExternalProcessor: func(key types.NamespacedName) *imv1alpha1.ExternalProcessor {
			for _, ep := range eps {
				if ep.Namespace == key.Namespace && ep.Name == key.Name {
					return ep
				}
			}
			return nil
		},
		Backends: BackendLookups{Service: func(key types.NamespacedName) *corev1.Service {
			ports, ok := svcs[key.String()]
			if !ok {
				return nil
			}
			s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
			for _, p := range ports {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: p})
			}
			return s
		}},
		Options: BackendOptions{ClusterDomain: "cluster.local"},
	}
}

func extRefFilter(group, kind, name string) gwv1.ListenerFilter {
	return gwv1.ListenerFilter{Type: gwv1.ListenerFilterExtensionRef,
		ExtensionRef: &gwv1.LocalObjectReference{Group: gwv1.Group(group), Kind: gwv1.Kind(kind), Name: gwv1.ObjectName(name)}}
}

func bbrRef(name string) gwv1.ListenerFilter {
	return extRefFilter(imv1alpha1.GroupName, imv1alpha1.ExternalProcessorKind, name)
}

// TestListenerFilterResolution: each outcome of a listener's
// filters.requests, with the listener conditions the GEP-5224 status
// section asks for, the message naming the filter by index, and what the
// translator gets (Filters in list order, or FilterError and no filters).
func TestListenerFilterResolution(t *testing.T) {
	streamed := func(s *imv1alpha1.ExternalProcessorSpec) {
		s.ProcessingMode = &imv1alpha1.ProcessingMode{RequestBody: imv1alpha1.BodyModeFullDuplexStreamed}
		s.FailureMode = imv1alpha1.FailOpen
		s.MessageTimeout = ptr.To(gwv1.Duration("1s"))
	}
	eps := []*imv1alpha1.ExternalProcessor{
		extProcessor("ns", "bbr", "bbr", 9004, streamed),
		extProcessor("ns", "second", "bbr", 9004, nil),
		extProcessor("ns", "no-service", "gone", 9004, nil),
		extProcessor("ns", "no-port", "bbr", 1234, nil),
		extProcessor("ns", "bad-mode", "bbr", 9004, func(s *imv1alpha1.ExternalProcessorSpec) {
			s.ProcessingMode = &imv1alpha1.ProcessingMode{RequestHeaders: imv1alpha1.HeaderModeSkip, RequestBody: imv1alpha1.BodyModeFullDuplexStreamed}
		}),
		extProcessor("other", "elsewhere", "bbr", 9004, nil),
	}
	lk := filterLookups(eps, map[string][]int32{"ns/bbr": {9004}, "other/bbr": {9004}})
	bbrModel := &model.ExternalProcessor{Namespace: "ns", Name: "bbr", Host: "bbr.ns.svc.cluster.local", Port: 9004,
		RequestHeaders: true, RequestBodyStreamed: true, FailOpen: true, MessageTimeout: time.Second}
	secondModel := &model.ExternalProcessor{Namespace: "ns", Name: "second", Host: "bbr.ns.svc.cluster.local", Port: 9004,
		RequestHeaders: true, MessageTimeout: DefaultProcessorMessageTimeout}
	cases := []struct {
		name       string
		protocol   gwv1.ProtocolType
		filters    []gwv1.ListenerFilter
		accepted   bool
		reason     gwv1.ListenerConditionReason
		refsReason gwv1.ListenerConditionReason
		msg        string // in the message of the False condition
		want       []*model.ExternalProcessor
	}{
		{name: "resolved, in order", filters: []gwv1.ListenerFilter{bbrRef("bbr"), bbrRef("second")}, accepted: true,
			want: []*model.ExternalProcessor{bbrModel, secondModel}},
		{name: "order reversed", filters: []gwv1.ListenerFilter{bbrRef("second"), bbrRef("bbr")}, accepted: true,
			want: []*model.ExternalProcessor{secondModel, bbrModel}},
		{name: "ExternalAuth is not served as a listener filter", filters: []gwv1.ListenerFilter{bbrRef("bbr"), {Type: gwv1.ListenerFilterExternalAuth,
			ExternalAuth: &gwv1.HTTPExternalAuthFilter{ExternalAuthProtocol: gwv1.HTTPRouteExternalAuthGRPCProtocol,
				BackendRef: gwv1.BackendObjectReference{Name: "authz", Port: ptr.To(gwv1.PortNumber(9000))}}}},
			reason: gwv1.ListenerReasonUnsupportedValue, msg: "filters.requests[1]: type ExternalAuth"},
		{name: "unknown kind", filters: []gwv1.ListenerFilter{extRefFilter("example.com", "BodyRouter", "bbr")}, accepted: true,
			refsReason: ListenerReasonInvalidListenerFilterRef, msg: "filters.requests[0]: extensionRef kind BodyRouter"},
		{name: "our kind in core group", filters: []gwv1.ListenerFilter{extRefFilter("", imv1alpha1.ExternalProcessorKind, "bbr")}, accepted: true,
			refsReason: ListenerReasonInvalidListenerFilterRef, msg: "filters.requests[0]: extensionRef kind ExternalProcessor in group \"\""},
		{name: "missing object", filters: []gwv1.ListenerFilter{bbrRef("bbr"), bbrRef("missing")}, accepted: true,
			refsReason: ListenerReasonInvalidListenerFilterRef, msg: "filters.requests[1]: ExternalProcessor ns/missing not found"},
		// A LocalObjectReference: the listener's namespace only.
		{name: "object of another namespace", filters: []gwv1.ListenerFilter{bbrRef("elsewhere")}, accepted: true,
			refsReason: ListenerReasonInvalidListenerFilterRef, msg: "ExternalProcessor ns/elsewhere not found"},
		{name: "Service missing", filters: []gwv1.ListenerFilter{bbrRef("no-service")}, accepted: true,
			refsReason: ListenerReasonInvalidListenerFilterRef, msg: "filters.requests[0]: ExternalProcessor ns/no-service does not resolve: spec.backendRef: Service ns/gone not found"},
		{name: "Service port missing", filters: []gwv1.ListenerFilter{bbrRef("no-port")}, accepted: true,
			refsReason: ListenerReasonInvalidListenerFilterRef, msg: "Service ns/bbr has no port 1234"},
		{name: "processor spec invalid", filters: []gwv1.ListenerFilter{bbrRef("bad-mode")},
			reason: ListenerReasonInvalidListenerFilter, msg: "filters.requests[0]: ExternalProcessor ns/bad-mode is not accepted: spec.processingMode: requestBody FullDuplexStreamed needs requestHeaders Send"},
		{name: "ExtensionRef without extensionRef", filters: []gwv1.ListenerFilter{{Type: gwv1.ListenerFilterExtensionRef}},
			reason: ListenerReasonInvalidListenerFilter, msg: "filters.requests[0]: type ExtensionRef without extensionRef"},
		// The API server's CEL rule refuses filters on other protocols;
		// without it (file mode) the controller refuses the listener: TCP
		// and TLS listeners are served, never without their filters.
		{name: "TCP listener", protocol: gwv1.TCPProtocolType, filters: []gwv1.ListenerFilter{bbrRef("bbr")},
			reason: gwv1.ListenerReasonUnsupportedValue, msg: "filters may only be set when protocol is HTTP or HTTPS, not TCP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proto := tc.protocol
			if proto == "" {
				proto = gwv1.HTTPProtocolType
			}
			gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw"}, Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{{
				Name: "l", Port: 80, Protocol: proto, Filters: &gwv1.ListenerFilters{Requests: tc.filters}}}}}
			l := NewGatewayView(gw, CertificateLookups{Filters: lk}).Listeners[0]
			if l.Accepted != tc.accepted || l.Reason != tc.reason {
				t.Errorf("Accepted = %v (%s: %s), want %v (%s)", l.Accepted, l.Reason, l.Message, tc.accepted, tc.reason)
			}
			wantRefs := tc.refsReason == ""
			if l.ResolvedRefs != wantRefs || l.RefsReason != tc.refsReason {
				t.Errorf("ResolvedRefs = %v (%s: %s), want %v (%s)", l.ResolvedRefs, l.RefsReason, l.RefsMessage, wantRefs, tc.refsReason)
			}
			msg := l.Message + l.RefsMessage
			if tc.msg != "" && !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q does not say %q", msg, tc.msg)
			}
			var got []*model.ExternalProcessor
			for _, f := range l.Filters {
				if f.Type != gwv1.ListenerFilterExtensionRef {
					t.Errorf("filter type %s", f.Type)
				}
				got = append(got, f.Processor)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("filters (-want +got):\n%s", d)
			}
			if (tc.refsReason != "") != (l.FilterError != "") {
				t.Errorf("FilterError %q with ResolvedRefs reason %q", l.FilterError, tc.refsReason)
			}
			// What the translator gets: a listener that is not accepted is
			// not served at all; one whose filters do not resolve is, with
			// FilterError and no filters (it answers 500).
			m := TranslatorGateway(GatewayView{Gateway: types.NamespacedName{Namespace: "ns", Name: "gw"}, Listeners: []ListenerView{l}}, nil)
			switch {
			case !tc.accepted:
				if len(m.Listeners) != 0 {
					t.Errorf("a listener that is not accepted is served: %+v", m.Listeners)
				}
			case len(m.Listeners) != 1:
				t.Errorf("served listeners %d, want 1", len(m.Listeners))
			default:
				if m.Listeners[0].FilterError != l.FilterError || len(m.Listeners[0].Filters) != len(tc.want) {
					t.Errorf("model listener: FilterError %q, %d filters; want %q, %d", m.Listeners[0].FilterError, len(m.Listeners[0].Filters), l.FilterError, len(tc.want))
				}
			}
			// The GEP's reasons appear only on False conditions, and on
			// listeners that use filters.
			st := GatewayStatus(&GatewayView{Gateway: types.NamespacedName{Namespace: "ns", Name: "gw"}, Listeners: []ListenerView{l}}, nil, true, metav1.Time{})
			for _, c := range st.Listeners[0].Conditions {
				if c.Status == metav1.ConditionTrue && strings.Contains(c.Reason, "ListenerFilter") {
					t.Errorf("condition %s=True with reason %s", c.Type, c.Reason)
				}
			}
		})
	}
}

// TestListenerFilterReasonsOnlyWithFilters: a listener without
// filters.requests never gets the GEP's reasons, whatever the lookups.
func TestListenerFilterReasonsOnlyWithFilters(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw"}, Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{
		{Name: "a", Port: 80, Protocol: gwv1.HTTPProtocolType},
		{Name: "b", Port: 81, Protocol: gwv1.HTTPProtocolType, Filters: &gwv1.ListenerFilters{}},
	}}}
	for _, l := range NewGatewayView(gw, CertificateLookups{Filters: filterLookups(nil, nil)}).Listeners {
		if !l.Accepted || !l.ResolvedRefs || l.FilterError != "" || len(l.Filters) != 0 {
			t.Errorf("listener %s: %+v", l.Name, l)
		}
	}
}

// TestExternalProcessorConditions: an ExternalProcessor's own status.
func TestExternalProcessorConditions(t *testing.T) {
	lk := filterLookups(nil, map[string][]int32{"ns/bbr": {9004}})
	cases := []struct {
		name string
		ep   *imv1alpha1.ExternalProcessor
		want string
	}{
		{"resolved", extProcessor("ns", "p", "bbr", 9004, nil), "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
		{"Service missing", extProcessor("ns", "p", "gone", 9004, nil), "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound"},
		{"port missing", extProcessor("ns", "p", "bbr", 9005, nil), "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound"},
		{"port out of range", extProcessor("ns", "p", "bbr", 0, nil), "Accepted=False/Invalid ResolvedRefs=False/Invalid"},
		{"failure mode", extProcessor("ns", "p", "bbr", 9004, func(s *imv1alpha1.ExternalProcessorSpec) { s.FailureMode = "Sometimes" }),
			"Accepted=False/Invalid ResolvedRefs=False/Invalid"},
		{"timeout over 1h", extProcessor("ns", "p", "bbr", 9004, func(s *imv1alpha1.ExternalProcessorSpec) { s.MessageTimeout = ptr.To(gwv1.Duration("2h")) }),
			"Accepted=False/Invalid ResolvedRefs=False/Invalid"},
		{"response body without headers", extProcessor("ns", "p", "bbr", 9004, func(s *imv1alpha1.ExternalProcessorSpec) {
			s.ProcessingMode = &imv1alpha1.ProcessingMode{ResponseBody: imv1alpha1.BodyModeFullDuplexStreamed}
		}), "Accepted=False/Invalid ResolvedRefs=False/Invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range ProcessorConditions(ResolveExternalProcessor(tc.ep, lk.Backends, lk.Options), 3) {
				if c.ObservedGeneration != 3 {
					t.Errorf("%s: observedGeneration %d", c.Type, c.ObservedGeneration)
				}
				got = append(got, c.Type+"="+string(c.Status)+"/"+c.Reason)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("conditions %s, want %s", g, tc.want)
			}
		})
	}
}

// TestListenerFilterFollowsProcessorChanges: through Build, a change to an
// ExternalProcessor (its failure mode) reaches the Translator's listener,
// and deleting it leaves the listener failing closed (FilterError).
func TestListenerFilterFollowsProcessorChanges(t *testing.T) {
	gw := seed.Gateway()
	gw.Spec.Listeners[0].Filters = &gwv1.ListenerFilters{Requests: []gwv1.ListenerFilter{bbrRef("bbr")}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: seed.GatewayNamespace, Name: "bbr"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 9004}}}}
	ep := extProcessor(seed.GatewayNamespace, "bbr", "bbr", 9004, func(s *imv1alpha1.ExternalProcessorSpec) { s.FailureMode = imv1alpha1.FailClose })
	p := newPipeline(t, true, seed.GatewayClassObject(), gw, svc, ep)
	listener := func() model.Listener {
		g := p.out.Models.GetKey(seed.GatewayNamespace + "/" + seed.GatewayName)
		if g == nil || len(g.Listeners) == 0 {
			return model.Listener{}
		}
		return g.Listeners[0]
	}
	describe := func() string { return fmt.Sprintf("%+v", listener()) }
	failOpen := func(want bool) func() bool {
		return func() bool {
			l := listener()
			return len(l.Filters) == 1 && l.Filters[0].Processor.FailOpen == want && l.FilterError == ""
		}
	}
	p.eventually("the processor resolved, FailClose", failOpen(false), describe)

	open := ep.DeepCopy()
	open.Spec.FailureMode = imv1alpha1.FailOpen
	open.ResourceVersion = "2"
	p.add(open)
	p.eventually("the processor's FailOpen in the Translator", failOpen(true), describe)

	p.procs.DeleteObject(seed.GatewayNamespace + "/bbr")
	p.eventually("the listener failing closed without its processor", func() bool {
		l := listener()
		return len(l.Filters) == 0 && strings.Contains(l.FilterError, "not found")
	}, describe)
}
