// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
)

// eppRefProblem says why the pool's spec.endpointPickerRef does not resolve
// to a usable Endpoint Picker Service, or "" when it does (or when the pool
// has none: see poolEPPNotResolved). epp is the Service the reference names
// in the pool's namespace, nil when it does not exist. Supported: the core
// group, kind Service, a non-empty name, a Service that exists, is not of
// type ExternalName, and has the port endpointPickerRef.port.number.
//
// Both the pool's ResolvedRefs condition (InvalidExtensionRef) and the
// route's (BackendNotFound) say this, so the two never disagree.
func eppRefProblem(pool *inferencev1.InferencePool, epp *corev1.Service) string {
	ref := pool.Spec.EndpointPickerRef
	if ref == nil {
		return ""
	}
	if g := ptr.Deref(ref.Group, ""); g != "" {
		return fmt.Sprintf("spec.endpointPickerRef.group %q is not supported: only the core group (a Service)", g)
	}
	if ref.Kind != "" && ref.Kind != serviceKind {
		return fmt.Sprintf("spec.endpointPickerRef.kind %q is not supported: only Service", ref.Kind)
	}
	if ref.Name == "" {
		return "spec.endpointPickerRef.name is empty"
	}
	key := pool.Namespace + "/" + string(ref.Name)
	switch {
	case epp == nil:
		return fmt.Sprintf("Service %s not found", key)
	case epp.Spec.Type == corev1.ServiceTypeExternalName:
		return fmt.Sprintf("Service %s is of type ExternalName, which is not supported", key)
	case ref.Port == nil:
		return "spec.endpointPickerRef.port is required for a Service"
	}
	if !slices.ContainsFunc(epp.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(ref.Port.Number) }) {
		return fmt.Sprintf("Service %s has no port %d", key, ref.Port.Number)
	}
	return ""
}

// poolEPPNotResolved is the message of a route's ResolvedRefs=False
// condition (reason BackendNotFound) for a backendRef to pool whose Endpoint
// Picker does not resolve, or "" when it does. It names the pool and its
// endpointPickerRef, as the GIE conformance test InferencePoolInvalidEPPService
// describes it ("an HTTPRoute that references an InferencePool with a
// non-existent EPP service should have a ResolvedRefs condition with a status
// of False and a reason of BackendNotFound"). A pool without
// endpointPickerRef (legal since GIE v1.6.0) does not resolve either: this
// implementation sends a pool's requests only through its Endpoint Picker, so
// such a route would answer 500 while claiming every reference resolved.
func poolEPPNotResolved(pool *inferencev1.InferencePool, epp *corev1.Service) string {
	key := pool.Namespace + "/" + pool.Name
	ref := pool.Spec.EndpointPickerRef
	if ref == nil {
		return fmt.Sprintf("InferencePool %s has no Endpoint Picker: spec.endpointPickerRef is not set, "+
			"and this implementation sends a pool's requests only through its Endpoint Picker", key)
	}
	problem := eppRefProblem(pool, epp)
	if problem == "" {
		return ""
	}
	return fmt.Sprintf("InferencePool %s: its Endpoint Picker (spec.endpointPickerRef %s) does not resolve: %s",
		key, describeEPPRef(pool.Namespace, ref), problem)
}

// describeEPPRef writes ref as "Service <namespace>/<name> port <n>", with a
// group prefix when one is set and the kind as written (default Service).
func describeEPPRef(namespace string, ref *inferencev1.EndpointPickerRef) string {
	kind := string(ref.Kind)
	if kind == "" {
		kind = serviceKind
	}
	if g := ptr.Deref(ref.Group, ""); g != "" {
		kind += "." + string(g)
	}
	s := fmt.Sprintf("%s %s/%s", kind, namespace, ref.Name)
	if ref.Port != nil {
		s += fmt.Sprintf(" port %d", ref.Port.Number)
	}
	return s
}
