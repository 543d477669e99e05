// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// CRD defaults as the embedded CRDs declare them, and the built-in defaults
// the pipeline relies on.
func TestDefaults(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "pool.yaml", `apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata:
  name: pool
spec:
  selector:
    matchLabels:
      app: vllm
  targetPorts:
  - number: 8000
  endpointPickerRef:
    name: epp
    port:
      number: 9002
`)
	write(t, dir, "route.yaml", `apiVersion: gateway.networking.k8s.io/v1beta1
kind: HTTPRoute
metadata:
  name: route
  namespace: llm
spec:
  parentRefs:
  - name: gw
  rules:
  - backendRefs:
    - name: pool
      group: inference.networking.k8s.io
      kind: InferencePool
`)
	write(t, dir, "core.yaml", docs(
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\nspec:\n  ports:\n  - port: 80\n",
		"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: llm\n",
		"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: gc\n  namespace: ignored\nspec:\n  controllerName: example.com/gc\n",
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: es\naddressType: IPv4\nendpoints: []\nports:\n- port: 80\n",
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: sec\nstringData:\n  a: b\n",
	))
	s := newSource(t, dir)
	if ps := s.Problems(); len(ps) > 0 {
		t.Fatalf("problems:\n%s", problemText(ps))
	}

	// InferencePool CRD: appProtocol http; endpointPickerRef group "", kind
	// Service, failureMode FailClose. A missing namespace is "default".
	p := s.InferencePools().GetKey("default/pool")
	if p == nil {
		t.Fatal("default/pool not loaded")
	}
	wantRef := &inferencev1.EndpointPickerRef{Group: ptr(inferencev1.Group("")), Kind: "Service", Name: "epp",
		Port: &inferencev1.Port{Number: 9002}, FailureMode: "FailClose"}
	if diff := cmp.Diff(wantRef, (*p).Spec.EndpointPickerRef); diff != "" {
		t.Errorf("endpointPickerRef (-want +got):\n%s", diff)
	}
	if (*p).Spec.AppProtocol != "http" {
		t.Errorf("appProtocol = %q, want http", (*p).Spec.AppProtocol)
	}

	// HTTPRoute CRD (v1beta1 manifest, stored as v1): parentRef group and
	// kind, a path match PathPrefix "/" when matches is empty, backendRef weight 1.
	r := s.HTTPRoutes().GetKey("llm/route")
	if r == nil {
		t.Fatal("llm/route not loaded")
	}
	route := *r
	if route.APIVersion != "gateway.networking.k8s.io/v1" {
		t.Errorf("apiVersion = %q", route.APIVersion)
	}
	pr := route.Spec.ParentRefs[0]
	if pr.Group == nil || *pr.Group != gatewayv1.GroupName || pr.Kind == nil || *pr.Kind != "Gateway" {
		t.Errorf("parentRef = %+v, want group %s kind Gateway", pr, gatewayv1.GroupName)
	}
	wantMatches := []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
		Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr("/")}}}
	if diff := cmp.Diff(wantMatches, route.Spec.Rules[0].Matches); diff != "" {
		t.Errorf("matches (-want +got):\n%s", diff)
	}
	if w := route.Spec.Rules[0].BackendRefs[0].Weight; w == nil || *w != 1 {
		t.Errorf("backendRef weight = %v, want 1", w)
	}

	// Service: SetDefaults_Service.
	svc := s.Services().GetKey("default/svc")
	if svc == nil {
		t.Fatal("default/svc not loaded")
	}
	spec := (*svc).Spec
	wantPorts := []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}}
	if diff := cmp.Diff(wantPorts, spec.Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	if spec.Type != corev1.ServiceTypeClusterIP || spec.SessionAffinity != corev1.ServiceAffinityNone {
		t.Errorf("type %q, sessionAffinity %q", spec.Type, spec.SessionAffinity)
	}

	// Namespace: the kubernetes.io/metadata.name label.
	if ns := s.Namespaces().GetKey("llm"); ns == nil || (*ns).Labels[corev1.LabelMetadataName] != "llm" {
		t.Errorf("namespace llm = %+v, want the metadata.name label", ns)
	}
	// Cluster-scoped: the namespace is dropped, the key is the name.
	if gc := s.GatewayClasses().GetKey("gc"); gc == nil || (*gc).Namespace != "" {
		t.Errorf("gatewayclass gc = %+v, want no namespace", gc)
	}
	// EndpointSlice port protocol TCP.
	es := s.EndpointSlices().GetKey("default/es")
	if es == nil || (*es).Ports[0].Protocol == nil || *(*es).Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("endpointslice = %+v, want port protocol TCP", es)
	}
	// Secret: stringData merged into data, type Opaque.
	sec := s.Secrets().GetKey("default/sec")
	if sec == nil || string((*sec).Data["a"]) != "b" || (*sec).StringData != nil || (*sec).Type != corev1.SecretTypeOpaque {
		t.Errorf("secret = %+v", sec)
	}
}

func ptr[T any](v T) *T { return &v }
