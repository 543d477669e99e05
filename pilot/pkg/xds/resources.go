// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"sort"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// GatewayResources is the per-Gateway output of translation: the proxy's
// LDS, RDS and CDS resources (each sorted by name, as the core builders
// return them) and the EDS cluster names its clusters need. Endpoints are
// not here: they come from the per-cluster EndpointResources collection, so
// an endpoint change does not rebuild the Gateway. Its krt key is the
// Gateway's "namespace/name".
type GatewayResources struct {
	Gateway   string
	Listeners []*listenerv3.Listener
	Routes    []*routev3.RouteConfiguration
	Clusters  []*clusterv3.Cluster
	// EDSNames are the eds_cluster_config.service_name of every EDS
	// cluster, sorted.
	EDSNames []string
	// Err is the translation error (it names the listener, route or rule);
	// when set the resource lists are empty and the push path keeps serving
	// the Gateway's last good version.
	Err string
}

// ResourceName is the krt key.
func (g GatewayResources) ResourceName() string { return g.Gateway }

// Equals compares two outputs so that krt emits no event when a Gateway's
// translation did not change.
func (g GatewayResources) Equals(o GatewayResources) bool {
	return g.Gateway == o.Gateway && g.Err == o.Err &&
		protosEqual(g.Listeners, o.Listeners) && routeConfigurationsEqual(g.Routes, o.Routes) &&
		protosEqual(g.Clusters, o.Clusters) && stringsEqual(g.EDSNames, o.EDSNames)
}

// EndpointResources is one EDS cluster's ClusterLoadAssignment. Its krt key
// is the cluster name.
type EndpointResources struct {
	Cluster    string
	Assignment *endpointv3.ClusterLoadAssignment
}

// ResourceName is the krt key.
func (e EndpointResources) ResourceName() string { return e.Cluster }

// Equals compares the assignments.
func (e EndpointResources) Equals(o EndpointResources) bool {
	return e.Cluster == o.Cluster && proto.Equal(e.Assignment, o.Assignment)
}

// GatewayBuilder returns the transformation from a Gateway to its
// resources; opts are the translator's knobs. Each Gateway is translated
// incrementally (core.Translator): what a change leaves equal keeps its
// message from the Gateway's previous translation. Everything it needs is
// in the model.Gateway, client TLS included (the controller resolves it),
// so it fetches nothing.
func GatewayBuilder(opts core.Options) krt.TransformationSingle[model.Gateway, GatewayResources] {
	return newGatewayTranslators(opts).builder()
}

// gatewayTranslators are the Translator of each Gateway, by key.
type gatewayTranslators struct {
	opts  core.Options
	mu    sync.Mutex
	byKey map[string]*gatewayTranslator
}

type gatewayTranslator struct {
	t *core.Translator
	// clusters and edsNames are the last output's (EDSNames is reused
	// while the cluster list is the same slice).
	clusters []*clusterv3.Cluster
	edsNames []string
}

func newGatewayTranslators(opts core.Options) *gatewayTranslators {
	return &gatewayTranslators{opts: opts.WithDefaults(), byKey: map[string]*gatewayTranslator{}}
}

func (g *gatewayTranslators) get(key string) *gatewayTranslator {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.byKey[key]
	if t == nil {
		t = &gatewayTranslator{t: core.NewTranslator(g.opts)}
		g.byKey[key] = t
	}
	return t
}

// forget drops a deleted Gateway's translator.
func (g *gatewayTranslators) forget(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.byKey, key)
}

func (g *gatewayTranslators) builder() krt.TransformationSingle[model.Gateway, GatewayResources] {
	return func(_ krt.HandlerContext, gw model.Gateway) *GatewayResources {
		out := &GatewayResources{Gateway: gw.ResourceName()}
		gt := g.get(out.Gateway)
		res, err := gt.t.Build(&gw, core.Inputs{})
		if err != nil {
			return &GatewayResources{Gateway: out.Gateway, Err: err.Error()}
		}
		out.Listeners, out.Routes, out.Clusters = res.Listeners, res.Routes, res.Clusters
		if sameList(out.Clusters, gt.clusters) && gt.clusters != nil {
			out.EDSNames = gt.edsNames
			return out
		}
		for _, c := range out.Clusters {
			if c.GetType() == clusterv3.Cluster_EDS {
				out.EDSNames = append(out.EDSNames, edsName(c))
			}
		}
		sort.Strings(out.EDSNames)
		gt.clusters, gt.edsNames = out.Clusters, out.EDSNames
		return out
	}
}

// sameList reports whether a and b are the same slice.
func sameList[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// EndpointBuilder returns the transformation from one cluster's endpoints
// to its ClusterLoadAssignment (core.BuildClusterLoadAssignment).
func EndpointBuilder() krt.TransformationSingle[model.ClusterEndpoints, EndpointResources] {
	return func(_ krt.HandlerContext, ce model.ClusterEndpoints) *EndpointResources {
		return &EndpointResources{Cluster: ce.Cluster, Assignment: core.BuildClusterLoadAssignment(ce.Cluster, ce.Endpoints)}
	}
}

// edsName is the name EDS knows cluster c by.
func edsName(c *clusterv3.Cluster) string {
	if n := c.GetEdsClusterConfig().GetServiceName(); n != "" {
		return n
	}
	return c.GetName()
}

func protosEqual[T proto.Message](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	if sameList(a, b) {
		return true
	}
	for i := range a {
		if any(a[i]) != any(b[i]) && !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// routeConfigurationsEqual is protosEqual for route configurations at the
// cost of what differs: a route change gives a new configuration whose
// other virtual hosts are the previous messages (core.Translator), and
// proto.Equal of the whole would compare thousands of them field by field
// up to the first difference.
func routeConfigurationsEqual(a, b []*routev3.RouteConfiguration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !routeConfigurationEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// routeConfigurationEqual is proto.Equal(x, y), comparing each pair of
// virtual hosts that are not the same message and then the other fields.
func routeConfigurationEqual(x, y *routev3.RouteConfiguration) bool {
	if x == nil || y == nil {
		return proto.Equal(x, y)
	}
	xv, yv := x.GetVirtualHosts(), y.GetVirtualHosts()
	if len(xv) != len(yv) {
		return false
	}
	for j := range xv {
		if xv[j] != yv[j] && !proto.Equal(xv[j], yv[j]) {
			return false
		}
	}
	return proto.Equal(withoutVirtualHosts(x), withoutVirtualHosts(y))
}

// withoutVirtualHosts is a message with rc's fields (and unknown fields)
// but virtual_hosts, sharing their values.
func withoutVirtualHosts(rc *routev3.RouteConfiguration) *routev3.RouteConfiguration {
	out := &routev3.RouteConfiguration{}
	dst := out.ProtoReflect()
	rc.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Number() != virtualHostsField {
			dst.Set(fd, v)
		}
		return true
	})
	dst.SetUnknown(rc.ProtoReflect().GetUnknown())
	return out
}

func stringsEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if sameList(a, b) {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
