// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var someManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}

func TestStripManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: someManagedFields}}
	got, err := StripManagedFields(pod)
	if err != nil || got != any(pod) || pod.ManagedFields != nil {
		t.Fatalf("typed: got %v, %v; managedFields %v", got, err, pod.ManagedFields)
	}

	u := &unstructured.Unstructured{}
	u.SetName("u")
	u.SetManagedFields(someManagedFields)
	if _, err := StripManagedFields(u); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "managedFields"); found {
		t.Fatalf("unstructured: managedFields still present: %v", u.Object)
	}

	// Idempotent, and anything without metadata passes through.
	if _, err := StripManagedFields(pod); err != nil {
		t.Fatal(err)
	}
	if got, err := StripManagedFields("not an object"); err != nil || got != "not an object" {
		t.Fatalf("passthrough: got %v, %v", got, err)
	}
}
