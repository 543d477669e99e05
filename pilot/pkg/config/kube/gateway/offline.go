// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"encoding/json"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// NewOffline builds the controller's collections over in with no writers:
// file mode (pilot-discovery -f DIR), where what the controller would write
// is computed and shown, never written. As in a cluster, where
// pilot-discovery creates the default GatewayClass
// (PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME) when it is missing, that
// class is added to in.GatewayClasses unless a class of that name is among
// them. With PILOT_ENABLE_GATEWAY_API off, Outputs are empty; with
// ENABLE_GATEWAY_API_INFERENCE_EXTENSION off, in.InferencePools is ignored.
func NewOffline(in Inputs, f features.Features, opts []krt.CollectionOption) *Controller {
	c := &Controller{}
	if !f.EnableGatewayAPI {
		return c
	}
	def := krt.NewStaticCollection(nil, []*gwv1.GatewayClass{DefaultGatewayClass(f)},
		append(opts, krt.WithName("gateway/DefaultGatewayClass"))...)
	// JoinCollection gives a key conflict to the first collection: a class
	// in the folder wins over the default, as an existing class does in a
	// cluster.
	in.GatewayClasses = krt.JoinCollection([]krt.Collection[*gwv1.GatewayClass]{in.GatewayClasses, def},
		append(opts, krt.WithName("gateway/GatewayClasses"))...)
	if !f.EnableInferenceExtension {
		in.InferencePools = nil
	}
	c.Outputs = Build(in, Options{
		ControllerName: f.ControllerName, ClusterDomain: f.ClusterDomain,
		InferenceEnabled: f.EnableInferenceExtension, Limits: LimitsOf(f), Krt: opts,
	})
	return c
}

// DefaultGatewayClass is the GatewayClass pilot-discovery creates when it is
// missing: named PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME, with our
// controllerName and ManagedLabel.
func DefaultGatewayClass(f features.Features) *gwv1.GatewayClass {
	return &gwv1.GatewayClass{
		TypeMeta: metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "GatewayClass"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   f.DefaultGatewayClassName,
			Labels: map[string]string{ManagedLabel: managedValue(f.ControllerName)},
		},
		Spec: gwv1.GatewayClassSpec{
			ControllerName: gwv1.GatewayController(f.ControllerName),
			Description:    ptr.To(defaultClassDescription),
		},
	}
}

// defaultClassDescription is the default GatewayClass's spec.description,
// in a cluster (defaultClassWriter) and in file mode (DefaultGatewayClass).
const defaultClassDescription = "The default GatewayClass of infermesh's pilot-discovery"

// ShadowServiceObjects turns the desired shadow Services (apply
// configurations) into the Service objects the API server would store
// after the apply, with the defaults the service registry relies on
// (port protocol TCP). In a cluster the registry sees shadow Services
// through the Service informer once they are applied; in file mode this
// collection stands in for that. A configuration that does not convert
// (it never happens for what ShadowService builds) is logged and left out.
func ShadowServiceObjects(shadows krt.Collection[ShadowServiceApply], opts ...krt.CollectionOption) krt.Collection[*corev1.Service] {
	return krt.NewCollection(shadows, func(_ krt.HandlerContext, d ShadowServiceApply) **corev1.Service {
		raw, err := json.Marshal(d.Apply)
		if err != nil {
			slog.Error("gateway: shadow Service", "service", d.ResourceName(), "error", err)
			return nil
		}
		svc := &corev1.Service{}
		if err := json.Unmarshal(raw, svc); err != nil {
			slog.Error("gateway: shadow Service", "service", d.ResourceName(), "error", err)
			return nil
		}
		for i := range svc.Spec.Ports {
			if svc.Spec.Ports[i].Protocol == "" {
				svc.Spec.Ports[i].Protocol = corev1.ProtocolTCP
			}
		}
		return &svc
	}, opts...)
}
