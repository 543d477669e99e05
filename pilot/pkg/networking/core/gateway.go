// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// Resources are all the xDS resources of one Gateway's proxy, each list
// sorted by resource name.
type Resources struct {
	Listeners []*listenerv3.Listener
	Routes    []*routev3.RouteConfiguration
	Clusters  []*clusterv3.Cluster
	Endpoints []*endpointv3.ClusterLoadAssignment
}

// BuildGateway translates one Gateway into its proxy's listeners, route
// configurations, clusters and endpoints (see BuildListeners,
// BuildRouteConfigurations, BuildClusters, BuildEndpoints), then runs
// Validate on the result. An error means the Gateway cannot be served as
// given (a translation error names the route and rule; a validation error
// the resource); the caller keeps serving the last good Resources.
func BuildGateway(gw *model.Gateway, in Inputs, opts Options) (Resources, error) {
	opts = opts.WithDefaults()
	var res Resources
	var err error
	if res.Listeners, err = BuildListeners(gw, opts); err != nil {
		return Resources{}, fmt.Errorf("gateway %s: listeners: %w", gw.ResourceName(), err)
	}
	if res.Routes, err = BuildRouteConfigurations(gw, opts); err != nil {
		return Resources{}, fmt.Errorf("gateway %s: routes: %w", gw.ResourceName(), err)
	}
	if res.Clusters, err = BuildClusters(gw, in, opts); err != nil {
		return Resources{}, fmt.Errorf("gateway %s: clusters: %w", gw.ResourceName(), err)
	}
	res.Endpoints = BuildEndpoints(res.Clusters, in)
	if err := Validate(res); err != nil {
		return Resources{}, fmt.Errorf("gateway %s: %w", gw.ResourceName(), err)
	}
	return res, nil
}
