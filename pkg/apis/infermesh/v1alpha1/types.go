// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ExternalProcessor is an Envoy external processor (ext_proc, gRPC
// envoy.service.ext_proc.v3.ExternalProcessor/Process) served by a
// Service of its namespace. A Gateway API listener filter of type
// ExtensionRef names it (group infermesh.io, kind ExternalProcessor), and
// then every request the listener accepts goes through it before route
// selection; a change it makes to the request's headers (other than Host,
// :authority, :scheme, :method and x-envoy-*, which never take effect) is
// seen by route matching. GIE's body-based router is the example: it
// copies the OpenAI "model" field of the body into X-Gateway-Model-Name,
// and HTTPRoutes match that header to pick an InferencePool.
//
// TLS to the processor is what a BackendTLSPolicy targeting the Service
// (and port) says; without one, plaintext HTTP/2.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=infermesh,shortName=extproc
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.backendRef.name`
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.spec.backendRef.port`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="ResolvedRefs",type=string,JSONPath=`.status.conditions[?(@.type=="ResolvedRefs")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ExternalProcessor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the processor's Service and how requests go to it.
	// +required
	Spec ExternalProcessorSpec `json:"spec"`

	// Status is what infermesh found of the spec.
	// +optional
	Status ExternalProcessorStatus `json:"status,omitempty"`
}

// ExternalProcessorSpec names the processor's Service and says what of a
// request it gets and what happens when it fails.
//
// +kubebuilder:validation:XValidation:message="requestBody FullDuplexStreamed needs requestHeaders Send",rule="!has(self.processingMode) || self.processingMode.requestBody != 'FullDuplexStreamed' || self.processingMode.requestHeaders == 'Send'"
// +kubebuilder:validation:XValidation:message="responseBody FullDuplexStreamed needs responseHeaders Send",rule="!has(self.processingMode) || self.processingMode.responseBody != 'FullDuplexStreamed' || self.processingMode.responseHeaders == 'Send'"
type ExternalProcessorSpec struct {
	// BackendRef is the Service, in the ExternalProcessor's namespace, and
	// the Service port of the processor's gRPC server. The port's
	// appProtocol need not say HTTP/2: gRPC always is.
	// +required
	BackendRef ServiceReference `json:"backendRef"`

	// ProcessingMode is what the processor is sent. Unset: request
	// headers only.
	// +optional
	ProcessingMode *ProcessingMode `json:"processingMode,omitempty"`

	// FailureMode is what a request gets when the processor cannot be
	// reached or fails: FailClose (the default) answers it with a 5xx,
	// FailOpen lets it go on as the processor had not been there. With a
	// FullDuplexStreamed body, FailOpen holds only until the first body
	// bytes went to the processor (Envoy cannot replay a body it streamed
	// away): a failure after that is a 500.
	// +kubebuilder:validation:Enum=FailOpen;FailClose
	// +kubebuilder:default=FailClose
	// +optional
	FailureMode FailureMode `json:"failureMode,omitempty"`

	// MessageTimeout bounds the wait for each answer of the processor when
	// no body is streamed in FullDuplexStreamed mode (Envoy runs no
	// per-message timer in that mode); on expiry the request gets a 504,
	// or goes on under FailOpen. Default 200ms, Envoy's; at most 1h.
	// +optional
	MessageTimeout *gwv1.Duration `json:"messageTimeout,omitempty"`
}

// ServiceReference is a port of a Service in the referrer's namespace.
type ServiceReference struct {
	// Name is the Service's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// Port is the Service port (spec.ports[].port).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`
}

// ProcessingMode is which parts of a request and its response go to the
// processor (Envoy's ext_proc ProcessingMode). Trailers go with a
// FullDuplexStreamed body (Envoy requires it) and are skipped otherwise.
type ProcessingMode struct {
	// RequestHeaders: Send (the default) or Skip.
	// +kubebuilder:validation:Enum=Send;Skip
	// +kubebuilder:default=Send
	// +optional
	RequestHeaders HeaderMode `json:"requestHeaders,omitempty"`

	// RequestBody: None (the default) or FullDuplexStreamed (the body
	// streams through the processor, which answers the headers once it
	// has read what it needs and streams the body back; what GIE's
	// body-based router does with --streaming).
	// +kubebuilder:validation:Enum=None;FullDuplexStreamed
	// +kubebuilder:default=None
	// +optional
	RequestBody BodyMode `json:"requestBody,omitempty"`

	// ResponseHeaders: Skip (the default) or Send.
	// +kubebuilder:validation:Enum=Send;Skip
	// +kubebuilder:default=Skip
	// +optional
	ResponseHeaders HeaderMode `json:"responseHeaders,omitempty"`

	// ResponseBody: None (the default) or FullDuplexStreamed.
	// +kubebuilder:validation:Enum=None;FullDuplexStreamed
	// +kubebuilder:default=None
	// +optional
	ResponseBody BodyMode `json:"responseBody,omitempty"`
}

// HeaderMode says whether headers go to the processor.
type HeaderMode string

// BodyMode says whether and how a body goes to the processor.
type BodyMode string

// FailureMode is what happens to a request when the processor fails.
type FailureMode string

const (
	HeaderModeSend HeaderMode = "Send"
	HeaderModeSkip HeaderMode = "Skip"

	BodyModeNone               BodyMode = "None"
	BodyModeFullDuplexStreamed BodyMode = "FullDuplexStreamed"

	FailOpen  FailureMode = "FailOpen"
	FailClose FailureMode = "FailClose"
)

// ExternalProcessorStatus is what infermesh found of an
// ExternalProcessor.
type ExternalProcessorStatus struct {
	// Conditions are Accepted and ResolvedRefs.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types and reasons of ExternalProcessorStatus.
const (
	// ConditionAccepted: the spec is one infermesh can serve. True with
	// ReasonAccepted; False with ReasonInvalid and a message naming the
	// field.
	ConditionAccepted = "Accepted"
	// ConditionResolvedRefs: the Service and port resolve (and the
	// BackendTLSPolicy that applies, if any, is valid). True with
	// ReasonResolvedRefs; False with ReasonBackendNotFound or
	// ReasonInvalidBackendTLS.
	ConditionResolvedRefs = "ResolvedRefs"

	ReasonAccepted          = "Accepted"
	ReasonInvalid           = "Invalid"
	ReasonResolvedRefs      = "ResolvedRefs"
	ReasonBackendNotFound   = "BackendNotFound"
	ReasonInvalidBackendTLS = "InvalidBackendTLS"
)

// ExternalProcessorList is a list of ExternalProcessors.
//
// +kubebuilder:object:root=true
type ExternalProcessorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ExternalProcessor `json:"items"`
}
