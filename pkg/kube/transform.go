// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// StripManagedFields is the informer transform of every informer the Client
// builds: it drops metadata.managedFields, which the control plane never
// reads and which is often the largest part of a small object's metadata.
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
