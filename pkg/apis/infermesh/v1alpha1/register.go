// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is infermesh's API group.
const GroupName = "infermesh.io"

// ExternalProcessorKind is the kind a listener filter's extensionRef names.
const ExternalProcessorKind = "ExternalProcessor"

var (
	// SchemeGroupVersion is infermesh.io/v1alpha1.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}
	// ExternalProcessorsGVR is the resource the controller watches.
	ExternalProcessorsGVR = SchemeGroupVersion.WithResource("externalprocessors")
	// ExternalProcessorGVK is the kind's GroupVersionKind.
	ExternalProcessorGVK = SchemeGroupVersion.WithKind(ExternalProcessorKind)

	// SchemeBuilder registers the kinds of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &ExternalProcessor{}, &ExternalProcessorList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
