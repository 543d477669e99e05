// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pkg/test/seed"
)

// seedPool is the InferencePool of the seed's File 2.
func seedPool() *inferencev1.InferencePool {
	p := seed.InferencePool()
	p.UID = types.UID("pool-uid")
	return p
}

func TestShadowServiceName(t *testing.T) {
	cases := map[string]string{
		"vllm-llama3-8b": "vllm-llama3-8b-ip-22dc7de1", // the seed's shadow Service
		"test-pool":      "test-pool-ip-2bee061e",
	}
	for pool, want := range cases {
		if got := ShadowServiceName(pool); got != want {
			t.Errorf("ShadowServiceName(%q) = %q, want %q", pool, got, want)
		}
	}
	long := strings.Repeat("a", 63)
	got := ShadowServiceName(long)
	if len(got) != 63 || !strings.HasPrefix(got, strings.Repeat("a", 51)+"-ip-") {
		t.Fatalf("63-character pool name gives %q (%d chars), want 51 a's, -ip-, 8 hex", got, len(got))
	}
	if other := ShadowServiceName(strings.Repeat("a", 62) + "b"); other == got {
		t.Fatal("two long names with the same 51-character prefix collide: the hash must be of the full name")
	}
	if n := ShadowServiceName(strings.Repeat("a", 51)); len(n) != 63 {
		t.Fatalf("a 51-character name must fit exactly, got %q", n)
	}
}

func TestShadowServiceSeed(t *testing.T) {
	want := corev1ac.Service("vllm-llama3-8b-ip-22dc7de1", "llm-namespace").
		WithLabels(map[string]string{
			"istio.io/inferencepool-name":                   "vllm-llama3-8b",
			"istio.io/inferencepool-extension-service":      "vllm-llama3-8b-epp",
			"istio.io/inferencepool-extension-port":         "9002",
			"istio.io/inferencepool-extension-failure-mode": "FailOpen",
			"internal.istio.io/service-semantics":           "inferencepool",
		}).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion("inference.networking.k8s.io/v1").WithKind("InferencePool").
			WithName("vllm-llama3-8b").WithUID("pool-uid")).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP("None").
			WithSelector(map[string]string{"app": "vllm-llama3-8b"}).
			WithPorts(corev1ac.ServicePort().WithName("http-0").WithProtocol(corev1.ProtocolTCP).
				WithPort(54321).WithTargetPort(intstr.FromInt32(8000))))
	if d := cmp.Diff(want, ShadowService(seedPool())); d != "" {
		t.Fatalf("shadow Service of the seed pool (-want +got):\n%s", d)
	}
}

func TestShadowServiceVariants(t *testing.T) {
	p := seedPool()
	p.Spec.TargetPorts = []inferencev1.Port{{Number: 8000}, {Number: 8001}, {Number: 8002}}
	p.Spec.AppProtocol = inferencev1.AppProtocolH2C
	svc := ShadowService(p)
	if len(svc.Spec.Ports) != 3 {
		t.Fatalf("%d ports, want 3", len(svc.Spec.Ports))
	}
	for i, port := range svc.Spec.Ports {
		if *port.Port != int32(54321+i) || port.TargetPort.IntVal != int32(8000+i) || *port.Name != "http-"+string(rune('0'+i)) {
			t.Errorf("port %d = %s %d -> %d", i, *port.Name, *port.Port, port.TargetPort.IntVal)
		}
		if ptr.Deref(port.AppProtocol, "") != "kubernetes.io/h2c" {
			t.Errorf("port %d appProtocol = %v, want kubernetes.io/h2c", i, port.AppProtocol)
		}
	}

	p = seedPool()
	p.Spec.EndpointPickerRef.FailureMode = ""
	if got := ShadowService(p).Labels["istio.io/inferencepool-extension-failure-mode"]; got != "FailClose" {
		t.Errorf("unset failureMode gives %q, want the default FailClose", got)
	}

	p.Spec.EndpointPickerRef = nil // legal since GIE v1.6.0
	labels := ShadowService(p).Labels
	for _, l := range []string{InferencePoolExtensionServiceLabel, InferencePoolExtensionPortLabel, InferencePoolExtensionFailureModeLabel} {
		if _, ok := labels[l]; ok {
			t.Errorf("pool without endpointPickerRef has label %s", l)
		}
	}
	if labels[InferencePoolNameLabel] != "vllm-llama3-8b" {
		t.Error("ownership label missing")
	}
}
