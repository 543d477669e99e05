// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The status of a Service stands in for a Gateway's: same client shape, and
// a type the fake clientset knows.
func serviceStatus(reason string) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service("gw", "ns").WithStatus(corev1ac.ServiceStatus().WithConditions(
		metav1ac.Condition().WithType("Programmed").WithStatus(metav1.ConditionTrue).WithReason(reason).
			WithMessage("ok").WithLastTransitionTime(metav1.Unix(1, 0)).WithObservedGeneration(1)))
}

func TestOwnedStatusWritesOnlyChanges(t *testing.T) {
	c := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw"}})
	// The fake clientset records a status apply's managedFields without the
	// "status" subresource that a real API server records, so
	// ExtractServiceStatus finds nothing there; read the same entry the way
	// the fake stores it. tests/integration/ownedstatus runs the real
	// extractor against a real API server.
	extract := func(s *corev1.Service, m string) (*corev1ac.ServiceApplyConfiguration, error) {
		return corev1ac.ExtractServiceFrom(s, m, "")
	}
	w := OwnedStatus[*corev1.Service, *corev1ac.ServiceApplyConfiguration]{FieldManager: manager, ExtractStatus: extract}
	ctx := context.Background()
	svcs := c.CoreV1().Services("ns")
	for i, step := range []struct {
		reason string
		wrote  bool
	}{{"Programmed", true}, {"Programmed", false}, {"Pending", true}, {"Pending", false}} {
		wrote, err := w.Apply(ctx, svcs, "ns", "gw", serviceStatus(step.reason))
		if err != nil || wrote != step.wrote {
			t.Fatalf("step %d (%s): wrote=%v err=%v, want wrote=%v", i, step.reason, wrote, err, step.wrote)
		}
		if got := liveNamed(t, c, "gw").Status.Conditions; len(got) != 1 || got[0].Reason != step.reason {
			t.Fatalf("step %d: live conditions %+v", i, got)
		}
	}
	if wrote, err := w.Apply(ctx, svcs, "ns", "missing", serviceStatus("x")); wrote || err != nil {
		t.Fatalf("missing object: wrote=%v err=%v", wrote, err)
	}
}

func liveNamed(t *testing.T, c *fake.Clientset, name string) *corev1.Service {
	t.Helper()
	s, err := c.CoreV1().Services("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
