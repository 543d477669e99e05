// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package bootstrap

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	registry "github.com/infermesh/infermesh/pilot/pkg/serviceregistry/kube"
	"github.com/infermesh/infermesh/pkg/kube/endpointslice"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// FileInputs are the controller's inputs over a folder's manifests: every
// collection of gateway.Inputs, each from src. It is the one list that
// discovery -f (fileMode) and status -f / check -f (FileController, from
// pilot-discovery's offline path) build their controller from, so what
// they report and what discovery -f serves come from the same objects.
// InferencePools is set even with the inference extension off;
// gateway.NewOffline drops it then.
func FileInputs(src *file.Source) gateway.Inputs {
	return gateway.Inputs{
		GatewayClasses:     src.GatewayClasses(),
		Gateways:           src.Gateways(),
		HTTPRoutes:         src.HTTPRoutes(),
		GRPCRoutes:         src.GRPCRoutes(),
		TLSRoutes:          src.TLSRoutes(),
		TCPRoutes:          src.TCPRoutes(),
		ReferenceGrants:    src.ReferenceGrants(),
		Namespaces:         src.Namespaces(),
		Services:           src.Services(),
		InferencePools:     src.InferencePools(),
		ConfigMaps:         src.ConfigMaps(),
		Secrets:            src.Secrets(),
		BackendTLSPolicies: src.BackendTLSPolicies(),
		DestinationRules:   src.DestinationRules(),
		ListenerSets:       src.ListenerSets(),
		ExternalProcessors: src.ExternalProcessors(),
	}
}

// FileController is the controller file mode runs over src
// (gateway.NewOffline over FileInputs): no writers, the default
// GatewayClass added.
func FileController(src *file.Source, f features.Features, opts []krt.CollectionOption) *gateway.Controller {
	return gateway.NewOffline(FileInputs(src), f, opts)
}

// fileMode builds stages 2 and 3 over a folder's manifests. It stands in
// for what the cluster would add between them: the shadow Services the
// controller would apply join the folder's Services, and every Service
// without an EndpointSlice in the folder gets the slices the EndpointSlice
// controller would compute from the folder's Pods.
func fileMode(src *file.Source, f features.Features, opts []krt.CollectionOption) (*gateway.Controller, registry.Outputs) {
	c := FileController(src, f, opts)
	services := src.Services()
	if c.ShadowServices != nil {
		shadows := gateway.ShadowServiceObjects(c.ShadowServices, append(opts, krt.WithName("file/ShadowServices"))...)
		services = krt.JoinCollection([]krt.Collection[*corev1.Service]{services, shadows},
			append(opts, krt.WithName("file/Services"))...)
	}
	slices := endpointslice.Collection(services, src.Pods(), src.EndpointSlices(),
		append(opts, krt.WithName("file/EndpointSlices"))...)
	reg := registry.Build(registry.Inputs{Services: services, EndpointSlices: slices},
		registry.Options{ClusterDomain: f.ClusterDomain, Krt: opts})
	return c, reg
}
