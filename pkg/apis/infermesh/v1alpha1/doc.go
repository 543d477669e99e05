// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package v1alpha1 is infermesh's own API, group infermesh.io, version
// v1alpha1: the kinds a Gateway API extension point of infermesh names.
//
// ExternalProcessor is the target of a listener filter of type
// ExtensionRef (Gateway API v1.7, Listener.filters.requests, GEP-5224):
// an Envoy external processor (ext_proc over gRPC) that every request the
// listener accepts goes through before route selection, such as GIE's
// body-based router. architecture/controller.md ("Listener filters") and
// architecture/xds.md ("Listener filters") describe what the controller
// and the translator make of it.
//
// The CRD, manifests/charts/infermesh/crds/infermesh.io_externalprocessors.yaml,
// is written by hand from these types (no generator runs in this
// repository); keep the two equal.
//
// # Files
//
//   - doc.go: this text and the package markers.
//   - types.go: ExternalProcessor, its spec and status, and the condition
//     types and reasons.
//   - register.go: the group, version, GroupVersionResource and the scheme.
//   - zz_generated.deepcopy.go: DeepCopy methods (controller-gen object).
//
// +kubebuilder:object:generate=true
// +groupName=infermesh.io
package v1alpha1
