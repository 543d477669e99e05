// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

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

func TestTLSSecretTransform(t *testing.T) {
	tlsSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cert", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{"a": "b"}, ManagedFields: someManagedFields,
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...tls.key...}"}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("CRT"), "tls.key": []byte("KEY"), "ca.crt": []byte("CA")},
	}
	// The core factory's transform of a Client that keeps no managedFields
	// (NewForConfig without WithAppliedFieldsOf).
	coreTransform := withTLSSecrets(keepAppliedFields(nil))
	got, err := coreTransform(tlsSecret)
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*corev1.Secret)
	want := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cert", UID: "u1", ResourceVersion: "7"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("CRT"), "tls.key": []byte("KEY"), "ca.crt": []byte("CA")}}
	if d := cmp.Diff(want, s); d != "" {
		t.Errorf("TLS Secret (-want +got):\n%s", d)
	}
	again, _ := coreTransform(s)
	if d := cmp.Diff(want, again); d != "" {
		t.Errorf("not idempotent (-want +got):\n%s", d)
	}

	opaque := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "token"}, Type: corev1.SecretTypeServiceAccountToken,
		Data: map[string][]byte{"token": []byte("T"), "tls.key": []byte("K")}}
	got, _ = coreTransform(opaque)
	if s := got.(*corev1.Secret); s.Data != nil || s.Type != corev1.SecretTypeServiceAccountToken {
		t.Errorf("other Secret types keep their type and no data: got type %q data keys %d", s.Type, len(s.Data))
	}
	// A credentialName Secret (Opaque): its CA bundle keys, nothing else.
	generic := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cred"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"cacert": []byte("CA1"), "ca.crt": []byte("CA2"), "key": []byte("K"), "cert": []byte("C")}}
	got, _ = coreTransform(generic)
	if d := cmp.Diff(map[string][]byte{"cacert": []byte("CA1"), "ca.crt": []byte("CA2")}, got.(*corev1.Secret).Data); d != "" {
		t.Errorf("Opaque Secret data (-want +got):\n%s", d)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}}}
	if got, _ := coreTransform(pod); got != any(pod) || pod.Labels == nil {
		t.Errorf("a Pod passes through with its labels")
	}
}

func TestKeepAppliedFields(t *testing.T) {
	ours := metav1.ManagedFieldsEntry{Manager: "ours", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply},
		ours,
		{Manager: "ours", Operation: metav1.ManagedFieldsOperationUpdate},
		{Manager: "ours", Operation: metav1.ManagedFieldsOperationApply, Subresource: "status"},
	}
	keep := keepAppliedFields([]string{"ours", "also-ours"})
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: slices.Clone(entries)}}
	got, err := keep(svc)
	if err != nil || got != any(svc) {
		t.Fatalf("got %v, %v", got, err)
	}
	want := []metav1.ManagedFieldsEntry{ours}
	if d := cmp.Diff(want, svc.ManagedFields); d != "" {
		t.Errorf("kept entries (-want +got):\n%s", d)
	}
	_, _ = keep(svc)
	if !cmp.Equal(want, svc.ManagedFields) {
		t.Errorf("not idempotent: %v", svc.ManagedFields)
	}

	// An object none of whose entries are kept keeps none at all, as
	// StripManagedFields leaves it; unstructured objects alike.
	theirs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: someManagedFields}}
	_, _ = keep(theirs)
	if theirs.ManagedFields != nil {
		t.Errorf("foreign entries kept: %v", theirs.ManagedFields)
	}
	u := &unstructured.Unstructured{}
	u.SetName("u")
	u.SetManagedFields(slices.Clone(entries))
	_, _ = keep(u)
	if !cmp.Equal(want, u.GetManagedFields()) {
		t.Errorf("unstructured: kept %v", u.GetManagedFields())
	}
	if got, err := keep("not an object"); err != nil || got != "not an object" {
		t.Fatalf("passthrough: got %v, %v", got, err)
	}

	// No managers: the Client's transform is StripManagedFields itself.
	none := keepAppliedFields(nil)
	svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: slices.Clone(entries)}}
	_, _ = none(svc)
	if svc.ManagedFields != nil {
		t.Errorf("without managers, entries kept: %v", svc.ManagedFields)
	}
}
