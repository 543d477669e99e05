// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package seed

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The seed's request, as the seed sends it with curl: POST /v1/completions
// with Host Hostname and the body {"model": RequestModel, "prompt": Prompt,
// "max_tokens": 100, "temperature": 0}.
const (
	RequestModel = "reviews-1" // the LoRA adapter of the model servers' --lora-modules
	Prompt       = "What do reviewers think about The Comedy of Errors?"
)

// Names of the seed scenario.
const (
	Namespace = "llm-namespace"
	PoolName  = "vllm-llama3-8b"
	EPPName   = "vllm-llama3-8b-epp"
	EPPPort   = 9002
)

// InferencePool returns a new copy of the seed's InferencePool: selector
// app=vllm-llama3-8b, target port 8000, endpoint picker vllm-llama3-8b-epp on
// port 9002 with failureMode FailOpen.
func InferencePool() *inferencev1.InferencePool {
	return &inferencev1.InferencePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: PoolName},
		Spec: inferencev1.InferencePoolSpec{
			Selector:    inferencev1.LabelSelector{MatchLabels: map[inferencev1.LabelKey]inferencev1.LabelValue{"app": PoolName}},
			TargetPorts: []inferencev1.Port{{Number: 8000}},
			EndpointPickerRef: &inferencev1.EndpointPickerRef{
				Name:        EPPName,
				Port:        &inferencev1.Port{Number: EPPPort},
				FailureMode: inferencev1.EndpointPickerFailOpen,
			},
		},
	}
}

// Names of the seed's Gateway (the seed names it and its class but shows no
// manifest for them), HTTPRoute and hostname.
const (
	GatewayNamespace = "gateway-namespace"
	GatewayName      = "gateway"
	GatewayClass     = "istio"
	RouteName        = "llm-route"
	Hostname         = "llm.ssup2.com"
)

// GatewayClassObject returns the GatewayClass istio with controllerName
// istio.io/gateway-controller (what istiod, and infermesh, create).
func GatewayClassObject() *gwv1.GatewayClass {
	return &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: GatewayClass},
		Spec:       gwv1.GatewayClassSpec{ControllerName: "istio.io/gateway-controller"},
	}
}

// Gateway returns the Gateway gateway-namespace/gateway of class istio with
// one HTTP listener "http" on port 80 admitting routes from all namespaces.
func Gateway() *gwv1.Gateway {
	all := gwv1.NamespacesFromAll
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: GatewayNamespace, Name: GatewayName},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: GatewayClass,
			Listeners: []gwv1.Listener{{
				Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}},
			}},
		},
	}
}

// HTTPRoute returns the seed's llm-route: host llm.ssup2.com, path prefix /,
// to the InferencePool vllm-llama3-8b, parent gateway-namespace/gateway. The
// parentRef's group and kind carry the values the API server defaults.
func HTTPRoute() *gwv1.HTTPRoute {
	prefix := gwv1.PathMatchPathPrefix
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: RouteName},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
				Group:     ptr.To(gwv1.Group("gateway.networking.k8s.io")),
				Kind:      ptr.To(gwv1.Kind("Gateway")),
				Namespace: ptr.To(gwv1.Namespace(GatewayNamespace)),
				Name:      GatewayName,
			}}},
			Hostnames: []gwv1.Hostname{Hostname},
			Rules: []gwv1.HTTPRouteRule{{
				Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: ptr.To("/")}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Group: ptr.To(gwv1.Group("inference.networking.k8s.io")),
					Kind:  ptr.To(gwv1.Kind("InferencePool")),
					Name:  PoolName,
				}}}},
			}},
		},
	}
}

// EPPService returns the seed's vllm-llama3-8b-epp Service: port 9002,
// appProtocol http2.
func EPPService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: EPPName},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": EPPName},
			Ports: []corev1.ServicePort{{
				Protocol: corev1.ProtocolTCP, Port: EPPPort, TargetPort: intstr.FromInt32(EPPPort),
				AppProtocol: ptr.To("http2"),
			}},
		},
	}
}
