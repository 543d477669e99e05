// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// StripManagedFields is the informer transform of every informer the Client
// builds (unless WithAppliedFieldsOf keeps some entries): it drops
// metadata.managedFields, which the control plane reads only to compare
// what it applied, and which is often the largest part of a small object's
// metadata.
// It works on typed and unstructured objects alike, changes the object in
// place (client-go hands transforms freshly decoded objects) and is
// idempotent, as client-go requires. Anything without object metadata passes
// through unchanged.
func StripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

var _ cache.TransformFunc = StripManagedFields

// TLSSecretTransform keeps of a Secret only what the control plane reads:
// its identity (namespace, name, UID, resourceVersion) and type; for a
// Secret of type kubernetes.io/tls, the data keys tls.crt and tls.key (an
// HTTPS listener's certificate; pilot/pkg/config/kube/gateway
// certificates.go); and for a Secret of any type, the CA bundle keys
// cacert and ca.crt (a DestinationRule's credentialName,
// pilot/pkg/config/kube/upstreamtls; CA certificates are public). Labels,
// annotations (kubectl's last-applied annotation holds a copy of the whole
// Secret) and every other key (ServiceAccount tokens, Helm releases, the
// private keys of other types, ...) are dropped, so the informer holds no
// credential it does not serve and little memory. Anything that is not a
// Secret passes through unchanged. It is idempotent, as client-go
// requires.
func TLSSecretTransform(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	out := &corev1.Secret{
		TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion,
			CreationTimestamp: s.CreationTimestamp, DeletionTimestamp: s.DeletionTimestamp,
		},
		Type: s.Type,
	}
	keep := func(k string) {
		if v, ok := s.Data[k]; ok {
			if out.Data == nil {
				out.Data = map[string][]byte{}
			}
			out.Data[k] = v
		}
	}
	if s.Type == corev1.SecretTypeTLS {
		keep(corev1.TLSCertKey)
		keep(corev1.TLSPrivateKeyKey)
	}
	keep(SecretCAKey)
	keep(corev1.ServiceAccountRootCAKey) // "ca.crt"
	return out, nil
}

// SecretCAKey is the generic Secret key Istio reads a CA bundle from
// first; ca.crt comes second.
const SecretCAKey = "cacert"

// keepAppliedFields returns the informers' managedFields transform:
// StripManagedFields when managers is empty; else one that keeps, of an
// object's managedFields, only the server-side apply entries (operation
// Apply, on the object itself, not a subresource) of those field managers
// (WithAppliedFieldsOf). An object with none keeps no managedFields at all.
// Like StripManagedFields it changes the object in place and is idempotent.
func keepAppliedFields(managers []string) cache.TransformFunc {
	if len(managers) == 0 {
		return StripManagedFields
	}
	keep := make(map[string]bool, len(managers))
	for _, m := range managers {
		keep[m] = true
	}
	return func(obj any) (any, error) {
		m, ok := obj.(metav1.Object)
		if !ok || m.GetManagedFields() == nil {
			return obj, nil
		}
		var kept []metav1.ManagedFieldsEntry
		for _, e := range m.GetManagedFields() {
			if keep[e.Manager] && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
				kept = append(kept, e)
			}
		}
		m.SetManagedFields(kept)
		return obj, nil
	}
}

// withTLSSecrets returns the core informer factory's transform: strip (the
// managedFields transform), then TLSSecretTransform. (The factory sets its
// one transform on every informer it builds, also one built through
// InformerFor, so the per-type step lives here.)
func withTLSSecrets(strip cache.TransformFunc) cache.TransformFunc {
	return func(obj any) (any, error) {
		obj, _ = strip(obj)
		return TLSSecretTransform(obj)
	}
}
