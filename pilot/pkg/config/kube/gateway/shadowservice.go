// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
)

// Labels and constants of the shadow Service, as Istio writes them.
const (
	// InferencePoolNameLabel marks a Service as a pool's shadow Service (its
	// value is the pool's name). Its presence is our ownership check: a
	// Service without it is never touched.
	InferencePoolNameLabel = "istio.io/inferencepool-name"
	// InferencePoolExtensionServiceLabel is the EPP Service's name.
	InferencePoolExtensionServiceLabel = "istio.io/inferencepool-extension-service"
	// InferencePoolExtensionPortLabel is the EPP Service port number.
	InferencePoolExtensionPortLabel = "istio.io/inferencepool-extension-port"
	// InferencePoolExtensionFailureModeLabel is FailOpen or FailClose.
	InferencePoolExtensionFailureModeLabel = "istio.io/inferencepool-extension-failure-mode"
	// ServiceSemanticsLabel with value ServiceSemanticsInferencePool tells
	// service discovery the Service is a pool's, not a user's.
	ServiceSemanticsLabel         = "internal.istio.io/service-semantics"
	ServiceSemanticsInferencePool = "inferencepool"
	// InferencePoolFieldManager is the server-side apply field manager of
	// shadow Services.
	InferencePoolFieldManager = "istio.io/inference-pool-controller"
	// ShadowServiceBasePort is the port of the first target port; target
	// port i gets ShadowServiceBasePort+i.
	ShadowServiceBasePort = 54321
)

// maxServiceName is the longest Service name (an RFC 1035 label).
const maxServiceName = 63

// ShadowServiceName returns the shadow Service name of the pool called pool:
// "<pool>-ip-<first 8 hex digits of sha256(pool)>". When that exceeds 63
// characters the pool name is cut to 51, keeping the hash of the full name, so
// two long names with a common prefix still differ. Examples:
// vllm-llama3-8b -> vllm-llama3-8b-ip-22dc7de1, test-pool -> test-pool-ip-2bee061e.
func ShadowServiceName(pool string) string {
	sum := sha256.Sum256([]byte(pool))
	suffix := "-ip-" + hex.EncodeToString(sum[:])[:8]
	if len(pool)+len(suffix) > maxServiceName {
		pool = pool[:maxServiceName-len(suffix)]
	}
	return pool + suffix
}

// FailureMode returns the pool's EPP failure mode: FailOpen only when set so,
// else FailClose (the GIE default, and the safe one).
func FailureMode(pool *inferencev1.InferencePool) inferencev1.EndpointPickerFailureMode {
	if r := pool.Spec.EndpointPickerRef; r != nil && r.FailureMode == inferencev1.EndpointPickerFailOpen {
		return inferencev1.EndpointPickerFailOpen
	}
	return inferencev1.EndpointPickerFailClose
}

// ShadowService returns the apply configuration of the pool's shadow Service:
// headless (clusterIP None), selecting the pool's matchLabels, one TCP port
// per target port i named "http-<i>" with port 54321+i and targetPort the
// pool's port, appProtocol copied from the pool (spec.appProtocol), the
// ownership and EPP labels, and an owner reference to the pool so the garbage
// collector removes the Service with the pool. A pool without
// endpointPickerRef (legal since GIE v1.6.0) gets no EPP labels.
func ShadowService(pool *inferencev1.InferencePool) *corev1ac.ServiceApplyConfiguration {
	labels := map[string]string{
		InferencePoolNameLabel: pool.Name,
		ServiceSemanticsLabel:  ServiceSemanticsInferencePool,
	}
	if r := pool.Spec.EndpointPickerRef; r != nil {
		labels[InferencePoolExtensionServiceLabel] = string(r.Name)
		if r.Port != nil {
			labels[InferencePoolExtensionPortLabel] = strconv.Itoa(int(r.Port.Number))
		}
		labels[InferencePoolExtensionFailureModeLabel] = string(FailureMode(pool))
	}
	selector := make(map[string]string, len(pool.Spec.Selector.MatchLabels))
	for k, v := range pool.Spec.Selector.MatchLabels {
		selector[string(k)] = string(v)
	}
	spec := corev1ac.ServiceSpec().
		WithClusterIP(corev1.ClusterIPNone).
		WithSelector(selector)
	for i, p := range pool.Spec.TargetPorts {
		port := corev1ac.ServicePort().
			WithName("http-" + strconv.Itoa(i)).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(int32(ShadowServiceBasePort + i)).
			WithTargetPort(intstr.FromInt32(int32(p.Number)))
		if pool.Spec.AppProtocol != "" {
			port.WithAppProtocol(string(pool.Spec.AppProtocol))
		}
		spec.WithPorts(port)
	}
	return corev1ac.Service(ShadowServiceName(pool.Name), pool.Namespace).
		WithLabels(labels).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(inferencev1.GroupVersion.String()).
			WithKind("InferencePool").
			WithName(pool.Name).
			WithUID(pool.UID)).
		WithSpec(spec)
}
