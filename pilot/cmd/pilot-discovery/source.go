// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/version"
)

// gatewayRef names a Gateway.
type gatewayRef struct{ Namespace, Name string }

func (g gatewayRef) String() string { return g.Namespace + "/" + g.Name }

// parseGatewayRef parses "namespace/name"; the error names the flag.
func parseGatewayRef(s string) (gatewayRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return gatewayRef{}, fmt.Errorf("--gateway %q: want NAMESPACE/NAME", s)
	}
	return gatewayRef{Namespace: ns, Name: name}, nil
}

// proxyResources is what a Gateway's proxy receives: the translation's
// listeners, route configurations, clusters and endpoints, and the SDS
// secrets its listeners name, with private keys redacted as Envoy's admin
// redacts them (xds.Redact).
type proxyResources struct {
	core.Resources
	Secrets []*tlsv3.Secret
}

// configSource yields the Envoy resources a Gateway's proxy receives. It is
// the seam between proxy-config and where configuration comes from:
// adsSource asks a running pilot-discovery over ADS; fileSource (-f)
// starts one in process over the manifests and asks it the same way.
type configSource interface {
	// Fetch returns what gw's proxy receives. It fails when the source
	// has no configuration for gw within ctx's deadline, or cannot be
	// reached.
	Fetch(ctx context.Context, gw gatewayRef) (proxyResources, error)
}

// adsSource fetches a Gateway's configuration from pilot-discovery's ADS
// port as the Gateway's Envoy would: one DeltaAggregatedResources stream
// whose node metadata names the Gateway, subscribing to CDS, then EDS for
// the EDS clusters, then LDS, then RDS for the route configurations the
// listeners name and SDS for the secrets their TLS contexts name.
type adsSource struct {
	address string
	creds   credentials.TransportCredentials
	// plaintext says creds are insecure (for hints on errors).
	plaintext bool
	// tokenFile, when set, is read and sent as "authorization: Bearer"
	// (for pilot-discovery --xds-auth=serviceaccount); needs TLS.
	tokenFile string
	// dial, when set, replaces the network dialer (file mode's in-memory
	// listener).
	dial func(ctx context.Context, addr string) (net.Conn, error)
}

var _ configSource = (*adsSource)(nil)

// errNoConfig is returned (wrapped) when the server sent nothing for a
// type before the deadline: the Gateway is unknown to it, not translated
// yet, or its configuration never passed validation.
var errNoConfig = errors.New("no configuration received")

// Fetch implements configSource.
func (s *adsSource) Fetch(ctx context.Context, gw gatewayRef) (proxyResources, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(s.creds)}
	if s.dial != nil {
		opts = append(opts, grpc.WithContextDialer(s.dial))
	}
	if s.tokenFile != "" {
		tok, err := os.ReadFile(s.tokenFile)
		if err != nil {
			return proxyResources{}, fmt.Errorf("--token-file: %w", err)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(strings.TrimSpace(string(tok)))))
	}
	conn, err := grpc.NewClient(s.address, opts...)
	if err != nil {
		return proxyResources{}, fmt.Errorf("ADS client for %s: %w", s.address, err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return proxyResources{}, adsTransportHint(fmt.Errorf("ADS stream to %s: %w", s.address, err), s.address, s.plaintext)
	}
	c := &deltaFetch{stream: stream, node: proxyNode(gw), got: map[string]map[string]*anypb.Any{}, answered: map[string]bool{}}
	if err := c.fetch(resourcev3.ClusterType, nil); err != nil {
		return proxyResources{}, s.describe(gw, err)
	}
	var res proxyResources
	var eds []string
	for _, a := range c.sorted(resourcev3.ClusterType) {
		cl := &clusterv3.Cluster{}
		if err := a.UnmarshalTo(cl); err != nil {
			return proxyResources{}, fmt.Errorf("cluster: %w", err)
		}
		res.Clusters = append(res.Clusters, cl)
		if cl.GetType() == clusterv3.Cluster_EDS {
			name := cl.GetEdsClusterConfig().GetServiceName()
			if name == "" {
				name = cl.GetName()
			}
			eds = append(eds, name)
		}
	}
	if len(eds) > 0 {
		if err := c.fetch(resourcev3.EndpointType, eds); err != nil {
			return proxyResources{}, s.describe(gw, err)
		}
	}
	if err := c.fetch(resourcev3.ListenerType, nil); err != nil {
		return proxyResources{}, s.describe(gw, err)
	}
	var rds []string
	for _, a := range c.sorted(resourcev3.ListenerType) {
		l := &listenerv3.Listener{}
		if err := a.UnmarshalTo(l); err != nil {
			return proxyResources{}, fmt.Errorf("listener: %w", err)
		}
		res.Listeners = append(res.Listeners, l)
		rds = append(rds, rdsNames(l)...)
	}
	if len(rds) > 0 {
		if err := c.fetch(resourcev3.RouteType, rds); err != nil {
			return proxyResources{}, s.describe(gw, err)
		}
	}
	for _, a := range c.sorted(resourcev3.EndpointType) {
		e := &endpointv3.ClusterLoadAssignment{}
		if err := a.UnmarshalTo(e); err != nil {
			return proxyResources{}, fmt.Errorf("endpoints: %w", err)
		}
		res.Endpoints = append(res.Endpoints, e)
	}
	for _, a := range c.sorted(resourcev3.RouteType) {
		r := &routev3.RouteConfiguration{}
		if err := a.UnmarshalTo(r); err != nil {
			return proxyResources{}, fmt.Errorf("route configuration: %w", err)
		}
		res.Routes = append(res.Routes, r)
	}
	sds, err := core.SecretNames(res.Listeners, res.Clusters)
	if err != nil {
		return proxyResources{}, err
	}
	if len(sds) > 0 {
		// The first SDS request is answered even when none of the names
		// is served (a missing or invalid Secret).
		if err := c.fetch(resourcev3.SecretType, sds); err != nil {
			return proxyResources{}, s.describe(gw, err)
		}
	}
	for _, a := range c.sorted(resourcev3.SecretType) {
		sec := &tlsv3.Secret{}
		if err := a.UnmarshalTo(sec); err != nil {
			return proxyResources{}, fmt.Errorf("secret: %w", err)
		}
		xds.Redact(sec)
		res.Secrets = append(res.Secrets, sec)
	}
	return res, nil
}

func (s *adsSource) describe(gw gatewayRef, err error) error {
	if errors.Is(err, errNoConfig) {
		return fmt.Errorf("gateway %s at %s: %w (is the Gateway programmed? its configuration is at "+
			"/debug/config_dump?gateway=%s on the debug port, --debug-address, default 127.0.0.1:%s)", gw, s.address, err, gw, defaultDebugPort)
	}
	return adsTransportHint(fmt.Errorf("gateway %s at %s: %w", gw, s.address, err), s.address, s.plaintext)
}

// proxyNode is the node this client presents: an id naming the tool, and
// the Gateway in the metadata keys the server maps proxies by.
func proxyNode(gw gatewayRef) *corev3.Node {
	host, _ := os.Hostname()
	md, _ := structpb.NewStruct(map[string]any{
		xds.MetadataGatewayNamespace: gw.Namespace,
		xds.MetadataGatewayName:      gw.Name,
	})
	return &corev3.Node{
		Id:                   "pilot-discovery-proxy-config~" + host,
		Metadata:             md,
		UserAgentName:        "pilot-discovery",
		UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: version.Version},
	}
}

// rdsNames are the route configuration names l's HTTP connection managers
// fetch over RDS.
func rdsNames(l *listenerv3.Listener) []string {
	var out []string
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			hcm := &hcmv3.HttpConnectionManager{}
			if f.GetTypedConfig().MessageIs(hcm) && f.GetTypedConfig().UnmarshalTo(hcm) == nil {
				if n := hcm.GetRds().GetRouteConfigName(); n != "" {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// deltaFetch is the client side of one delta ADS stream: it keeps every
// resource received per type, whatever order responses come in.
type deltaFetch struct {
	stream   discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node     *corev3.Node
	sentNode bool
	got      map[string]map[string]*anypb.Any
	answered map[string]bool
}

// fetch subscribes to typeURL (names nil: wildcard) and receives until the
// first response of that type; responses of other types that arrive
// meanwhile are applied too.
func (c *deltaFetch) fetch(typeURL string, names []string) error {
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: names}
	if !c.sentNode {
		req.Node, c.sentNode = c.node, true
	}
	if err := c.stream.Send(req); err != nil {
		return fmt.Errorf("%s request: %w", shortType(typeURL), sendErr(c.stream))
	}
	for !c.answered[typeURL] {
		resp, err := c.stream.Recv()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", shortType(typeURL), streamErr(err))
		}
		t := resp.GetTypeUrl()
		m := c.got[t]
		if m == nil {
			m = map[string]*anypb.Any{}
			c.got[t] = m
		}
		for _, r := range resp.GetResources() {
			m[r.GetName()] = r.GetResource()
		}
		for _, n := range resp.GetRemovedResources() {
			delete(m, n)
		}
		c.answered[t] = true
	}
	return nil
}

// sorted returns the resources of typeURL ordered by name.
func (c *deltaFetch) sorted(typeURL string) []*anypb.Any {
	m := c.got[typeURL]
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*anypb.Any, 0, len(names))
	for _, n := range names {
		out = append(out, m[n])
	}
	return out
}

// sendErr returns the stream's status after a failed Send (gRPC reports
// the reason on Recv).
func sendErr(s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) error {
	_, err := s.Recv()
	return streamErr(err)
}

// streamErr turns a deadline into errNoConfig: the server answers nothing
// for a Gateway it has no configuration for.
func streamErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return fmt.Errorf("%w before the deadline", errNoConfig)
	}
	return err
}

func shortType(typeURL string) string {
	switch typeURL {
	case resourcev3.ClusterType:
		return "CDS"
	case resourcev3.EndpointType:
		return "EDS"
	case resourcev3.ListenerType:
		return "LDS"
	case resourcev3.RouteType:
		return "RDS"
	case resourcev3.SecretType:
		return "SDS"
	}
	return typeURL
}

// bearerToken is gRPC per-RPC credentials sending "authorization: Bearer
// <token>"; it refuses plaintext connections.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return true }
