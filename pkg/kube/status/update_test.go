// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The shared-status cycle on a Service's status.conditions: the same shape as
// an InferencePool's or route's parents, with a type the fake clientset has.
func setCondition(c *fake.Clientset, reason string) (bool, error) {
	svcs := c.CoreV1().Services("ns")
	return UpdateShared(context.Background(), "ns/svc",
		func(ctx context.Context) (*corev1.Service, error) { return svcs.Get(ctx, "svc", metav1.GetOptions{}) },
		func(live *corev1.Service) (*corev1.Service, bool) {
			if len(live.Status.Conditions) == 1 && live.Status.Conditions[0].Reason == reason {
				return nil, false
			}
			next := live.DeepCopy()
			next.Status.Conditions = []metav1.Condition{{Type: "Accepted", Status: "True", Reason: reason}}
			return next, true
		},
		func(ctx context.Context, s *corev1.Service) error {
			_, err := svcs.UpdateStatus(ctx, s, metav1.UpdateOptions{})
			return err
		})
}

func TestUpdateSharedRetriesConflictsAndSkipsNoops(t *testing.T) {
	c := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"}})
	conflicts := 2
	updates := 0
	c.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		updates++
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "svc", nil)
		}
		return false, nil, nil
	})
	wrote, err := setCondition(c, "First")
	if err != nil || !wrote {
		t.Fatalf("first write: wrote=%v err=%v", wrote, err)
	}
	if updates != 3 {
		t.Fatalf("UpdateStatus calls = %d, want 3 (two conflicts, then success)", updates)
	}
	wrote, err = setCondition(c, "First")
	if err != nil || wrote || updates != 3 {
		t.Fatalf("unchanged status: wrote=%v err=%v updates=%d; want no write", wrote, err, updates)
	}
	live, _ := c.CoreV1().Services("ns").Get(context.Background(), "svc", metav1.GetOptions{})
	if len(live.Status.Conditions) != 1 || live.Status.Conditions[0].Reason != "First" {
		t.Fatalf("live conditions = %+v", live.Status.Conditions)
	}
}

func TestUpdateSharedMissingObject(t *testing.T) {
	wrote, err := setCondition(fake.NewClientset(), "X")
	if err != nil || wrote {
		t.Fatalf("missing object: wrote=%v err=%v, want neither", wrote, err)
	}
}

func TestUpdateSharedGivesUp(t *testing.T) {
	c := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"}})
	c.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "svc", nil)
	})
	if _, err := setCondition(c, "X"); err == nil || !apierrors.IsConflict(err) {
		t.Fatalf("persistent conflict: err=%v, want a wrapped conflict", err)
	}
}
