// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

func paramsConfigMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "infermesh-system", Name: "class-params"}, Data: data}
}

func paramsRef() *gwv1.ParametersReference {
	return &gwv1.ParametersReference{Group: "", Kind: "ConfigMap", Name: "class-params", Namespace: ptr.To(gwv1.Namespace("infermesh-system"))}
}

func TestResolveClassParams(t *testing.T) {
	cases := []struct {
		name        string
		ref         *gwv1.ParametersReference
		cm          *corev1.ConfigMap
		mode        model.EPPBodyMode
		problemHave []string // substrings of the problem; none: no problem
	}{
		{name: "no parametersRef", mode: model.EPPBodyModeFullDuplexStreamed},
		{name: "Streamed", ref: paramsRef(), cm: paramsConfigMap(map[string]string{"eppRequestBodyMode": "Streamed"}), mode: model.EPPBodyModeStreamed},
		{name: "FullDuplexStreamed", ref: paramsRef(), cm: paramsConfigMap(map[string]string{"eppRequestBodyMode": "FullDuplexStreamed"}), mode: model.EPPBodyModeFullDuplexStreamed},
		{name: "empty ConfigMap", ref: paramsRef(), cm: paramsConfigMap(nil), mode: model.EPPBodyModeFullDuplexStreamed},
		{name: "missing ConfigMap", ref: paramsRef(), problemHave: []string{"ConfigMap infermesh-system/class-params", "does not exist"}},
		{name: "bad value", ref: paramsRef(), cm: paramsConfigMap(map[string]string{"eppRequestBodyMode": "BUFFERED"}),
			problemHave: []string{"ConfigMap infermesh-system/class-params", "eppRequestBodyMode", `"BUFFERED"`, "FullDuplexStreamed, Streamed"}},
		{name: "unknown key", ref: paramsRef(), cm: paramsConfigMap(map[string]string{"eppRequestBodyMod": "Streamed"}),
			problemHave: []string{"ConfigMap infermesh-system/class-params", `key "eppRequestBodyMod"`}},
		{name: "not a ConfigMap", ref: &gwv1.ParametersReference{Group: "example.com", Kind: "Params", Name: "p"},
			problemHave: []string{"example.com/Params p", "must name a ConfigMap"}},
		{name: "no namespace", ref: &gwv1.ParametersReference{Kind: "ConfigMap", Name: "class-params"},
			problemHave: []string{"ConfigMap class-params", "no namespace"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gc := gatewayClass("istio", controller)
			gc.Spec.ParametersRef = tc.ref
			lookups := 0
			p := ResolveClassParams(gc, func(ns, name string) *corev1.ConfigMap {
				lookups++
				if tc.cm != nil && ns == tc.cm.Namespace && name == tc.cm.Name {
					return tc.cm
				}
				return nil
			})
			if len(tc.problemHave) == 0 {
				if p.Problem != "" || p.EPPBodyMode != tc.mode {
					t.Fatalf("got mode %q problem %q, want mode %q and no problem", p.EPPBodyMode, p.Problem, tc.mode)
				}
				return
			}
			for _, want := range tc.problemHave {
				if !strings.Contains(p.Problem, want) {
					t.Errorf("problem %q does not name %q", p.Problem, want)
				}
			}
			if p.EPPBodyMode != model.EPPBodyModeFullDuplexStreamed {
				t.Errorf("mode %q with a problem", p.EPPBodyMode)
			}
		})
	}
}

// The class's parametersRef through the pipeline: a valid ConfigMap selects
// the Gateway's EPP body mode; a bad value and then a deleted ConfigMap
// make the class Accepted=False/InvalidParameters naming the ConfigMap
// (and key), the Gateway Accepted=False/InvalidParameters, and the
// translator's Gateway carries the problem (it is then refused).
func TestGatewayClassParameters(t *testing.T) {
	gc := seed.GatewayClassObject()
	gc.Spec.ControllerName = controller
	gc.Spec.ParametersRef = paramsRef()
	objs := append(seedObjects()[1:], gc, paramsConfigMap(map[string]string{"eppRequestBodyMode": "Streamed"}))
	p := newPipeline(t, true, objs...)
	gwKey := seed.GatewayNamespace + "/" + seed.GatewayName

	classCond := func() *metav1.Condition {
		if s := p.out.ClassStatuses.GetKey(gc.Name); s != nil {
			return &s.Condition
		}
		return nil
	}
	gwAccepted := func() *metav1.Condition {
		if s := p.out.GatewayStatuses.GetKey(gwKey); s != nil {
			return meta.FindStatusCondition(s.Status.Conditions, "Accepted")
		}
		return nil
	}
	translated := func() *model.Gateway { return p.out.Models.GetKey(gwKey) }
	describe := func() string {
		return conditionsOf(ptrSlice(classCond())) + " gateway: " + conditionsOf(ptrSlice(gwAccepted())) + " translator: " + describeModel(translated())
	}

	p.eventually("Streamed accepted", func() bool {
		c, g, m := classCond(), gwAccepted(), translated()
		return c != nil && c.Status == "True" && g != nil && g.Status == "True" &&
			m != nil && m.EPPBodyMode == model.EPPBodyModeStreamed && m.ClassParametersError == ""
	}, describe)

	p.add(paramsConfigMap(map[string]string{"eppRequestBodyMode": "Buffered"}))
	p.eventually("bad value", func() bool {
		c, g, m := classCond(), gwAccepted(), translated()
		return c != nil && c.Status == "False" && c.Reason == "InvalidParameters" &&
			strings.Contains(c.Message, "ConfigMap infermesh-system/class-params") && strings.Contains(c.Message, "eppRequestBodyMode") &&
			g != nil && g.Status == "False" && g.Reason == "InvalidParameters" && strings.Contains(g.Message, gc.Name) &&
			m != nil && strings.Contains(m.ClassParametersError, `"Buffered"`)
	}, describe)

	p.cms.DeleteObject("infermesh-system/class-params")
	p.eventually("missing ConfigMap", func() bool {
		c, m := classCond(), translated()
		return c != nil && c.Status == "False" && c.Reason == "InvalidParameters" &&
			strings.Contains(c.Message, "ConfigMap infermesh-system/class-params named by spec.parametersRef does not exist") &&
			m != nil && strings.Contains(m.ClassParametersError, "does not exist")
	}, describe)

	p.add(paramsConfigMap(map[string]string{"eppRequestBodyMode": "FullDuplexStreamed"}))
	p.eventually("recovered, default mode", func() bool {
		c, g, m := classCond(), gwAccepted(), translated()
		return c != nil && c.Status == "True" && g != nil && g.Status == "True" &&
			m != nil && m.EPPBodyMode == model.EPPBodyModeFullDuplexStreamed && m.ClassParametersError == ""
	}, describe)
}

func ptrSlice(c *metav1.Condition) []metav1.Condition {
	if c == nil {
		return nil
	}
	return []metav1.Condition{*c}
}

func describeModel(m *model.Gateway) string {
	if m == nil {
		return "none"
	}
	return string(m.EPPBodyMode) + " / " + m.ClassParametersError
}

// A Gateway naming parameters of its own (spec.infrastructure.parametersRef)
// is Accepted=False/InvalidParameters with the reference in the message,
// as the Gateway API's GatewayInvalidParametersRef expects: this
// controller implements no Gateway-level parameters.
func TestGatewayParametersRefNotAccepted(t *testing.T) {
	gw := &gwv1.Gateway{}
	if p := gatewayParametersProblem(gw); p != "" {
		t.Errorf("no parametersRef: problem %q", p)
	}
	gw.Spec.Infrastructure = &gwv1.GatewayInfrastructure{ParametersRef: &gwv1.LocalParametersReference{Group: "invalid.io", Kind: "InvalidParameters", Name: "invalid"}}
	p := gatewayParametersProblem(gw)
	if !strings.Contains(p, "invalid.io/InvalidParameters invalid") {
		t.Fatalf("problem %q does not name the reference", p)
	}
	st := withInvalidParameters(gwv1.GatewayStatus{Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}}}, p)
	if c := st.Conditions[0]; c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonInvalidParameters) || !strings.Contains(c.Message, p) {
		t.Errorf("Accepted = %+v, want False/InvalidParameters naming the reference", c)
	}
	if m := TranslatorGateway(GatewayView{ParametersProblem: p}, nil); m.ClassParametersError != p {
		t.Errorf("translator's Gateway: ClassParametersError %q, want the problem (refused)", m.ClassParametersError)
	}
}
