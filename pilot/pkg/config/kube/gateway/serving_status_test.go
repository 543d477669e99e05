// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

func refusedRoute(lastGood bool) model.GatewayServing {
	return model.GatewayServing{Namespace: "gateway-namespace", Name: "gateway", Refused: []model.RefusedResource{{
		Type: "route", Name: "http.80/llm.ssup2.com:80/llm-namespace.llm-route.0", LastGood: lastGood,
		Error: `request header "x-discount": unescaped '%'`,
	}}}
}

func programmedOf(st gwv1.GatewayStatus) metav1.Condition {
	for _, c := range st.Conditions {
		if c.Type == string(gwv1.GatewayConditionProgrammed) {
			return c
		}
	}
	return metav1.Condition{}
}

func TestWithServing(t *testing.T) {
	view := NewGatewayView(seedGateway(), CertificateLookups{})
	programmed := GatewayStatus(view, nil, true, now)
	if got := WithServing(programmed, nil); !cmp.Equal(got, programmed) {
		t.Error("nothing refused changed the status")
	}
	got := WithServing(programmed, ptrTo(refusedRoute(false)))
	c := programmedOf(got)
	want := "1 part(s) of the Gateway's configuration failed validation and are not served as written; the rest is served; " +
		`route http.80/llm.ssup2.com:80/llm-namespace.llm-route.0 (left out): request header "x-discount": unescaped '%'`
	if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonInvalid) || c.Message != want {
		t.Errorf("Programmed = %s/%s %q", c.Status, c.Reason, c.Message)
	}
	if c.ObservedGeneration != view.Generation {
		t.Errorf("generation %d", c.ObservedGeneration)
	}
	if programmedOf(programmed).Status != metav1.ConditionTrue {
		t.Error("WithServing modified its input")
	}
	if d := cmp.Diff(condStrings(programmed.Listeners[0].Conditions), condStrings(got.Listeners[0].Conditions)); d != "" {
		t.Errorf("listener conditions changed (-before +after):\n%s", d)
	}

	whole := model.GatewayServing{Refused: []model.RefusedResource{{Type: "translation", Name: "gateway-namespace/gateway", LastGood: true, Error: "routes: rule 0 has neither HTTP nor GRPC"}}}
	if m := programmedOf(WithServing(programmed, &whole)).Message; !strings.HasPrefix(m, "The Gateway's configuration was refused as a whole; its proxies keep the last good configuration; translation") {
		t.Errorf("whole refusal message %q", m)
	}

	many := model.GatewayServing{}
	for range 8 {
		many.Refused = append(many.Refused, model.RefusedResource{Type: "route", Name: "r", Error: strings.Repeat("x", 10000)})
	}
	m := programmedOf(WithServing(programmed, &many)).Message
	if !strings.HasSuffix(m, "; and 3 more (pilot-discovery proxy-status, /debug/syncz)") || len(m) > 2000 {
		t.Errorf("long message: %d bytes, ends %q", len(m), m[len(m)-60:])
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestServedGatewayStatuses: the ADS server's refusal turns the written
// Programmed condition False/Invalid and its clearing restores it.
func TestServedGatewayStatuses(t *testing.T) {
	stop := krt.WithStop(t.Context().Done())
	base := GatewayStatus(NewGatewayView(seedGateway(), CertificateLookups{}), nil, true, metav1.Time{})
	statuses := krt.NewStaticCollection(nil, []GatewayStatusResult{{Namespace: "gateway-namespace", Name: "gateway", Status: base}}, stop)
	serving := krt.NewStaticCollection[model.GatewayServing](nil, nil, stop)
	served := ServedGatewayStatuses(statuses, serving, []krt.CollectionOption{stop})
	if !served.WaitUntilSynced(t.Context().Done()) {
		t.Fatal("not synced")
	}
	programmed := func() string {
		s := served.GetKey("gateway-namespace/gateway")
		if s == nil {
			return ""
		}
		c := programmedOf(s.Status)
		return string(c.Status) + "/" + c.Reason
	}
	poll.UntilOr(t, 10*time.Second, "Programmed", func() bool { return programmed() == "True/Programmed" }, programmed)
	serving.UpdateObject(refusedRoute(true))
	poll.UntilOr(t, 10*time.Second, "Programmed after a refusal", func() bool { return programmed() == "False/Invalid" }, programmed)
	serving.DeleteObject("gateway-namespace/gateway")
	poll.UntilOr(t, 10*time.Second, "Programmed after the fix", func() bool { return programmed() == "True/Programmed" }, programmed)
}

// TestNewControllerReadsServing: with ControllerConfig.Serving, the status
// the Gateway writer applies (after the deployment's Programmed) turns
// False/Invalid on a refusal and back when it clears.
func TestNewControllerReadsServing(t *testing.T) {
	stop := krt.WithStop(t.Context().Done())
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "istio"}, Spec: gwv1.GatewayClassSpec{ControllerName: controller}}
	client := kube.NewFake(append(kube.OptionalCRDs(), class, seedGateway())...)
	serving := krt.NewStaticCollection[model.GatewayServing](nil, nil, stop)
	c, err := NewController(ControllerConfig{Client: client, Features: features.Defaults(), IsLeader: func() bool { return true },
		Krt: []krt.CollectionOption{stop}, Serving: serving})
	if err != nil {
		t.Fatal(err)
	}
	client.Start(t.Context().Done())
	t.Cleanup(client.Shutdown)
	programmed := func() string {
		s := c.WrittenGatewayStatuses.GetKey("gateway-namespace/gateway")
		if s == nil {
			return ""
		}
		p := programmedOf(s.Status)
		return string(p.Status) + "/" + p.Reason
	}
	// No Service yet: the deployment's reason.
	poll.UntilOr(t, 10*time.Second, "Programmed", func() bool { return programmed() == "False/AddressNotUsable" }, programmed)
	serving.UpdateObject(refusedRoute(false))
	poll.UntilOr(t, 10*time.Second, "Programmed after a refusal", func() bool { return programmed() == "False/Invalid" }, programmed)
	serving.DeleteObject("gateway-namespace/gateway")
	poll.UntilOr(t, 10*time.Second, "Programmed after the fix", func() bool { return programmed() == "False/AddressNotUsable" }, programmed)
}
