// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The five xDS types, in the order Envoy subscribes to them (SDS once a
// listener names a secret).
var xdsTypes = []string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType, resourcev3.SecretType}

// typeState is the client's view of one xDS type on the current stream
// (names, versions) and across streams (accepted resources).
type typeState struct {
	url      string
	wildcard bool
	names    map[string]bool // subscribed names (non-wildcard types)
	version  string          // last accepted version_info (SotW) / system_version_info
	nonce    string          // nonce of the last response on this stream
	// versions is each accepted resource's version (delta).
	versions map[string]string
}

// accepted resource sets, validated and compiled.
type store struct {
	listeners map[string]*listenerEntry
	routes    map[string]*routeEntry
	clusters  map[string]*clusterEntry
	endpoints map[string]*endpointEntry // by EDS service name
	secrets   map[string]*secretEntry
}

type listenerEntry struct {
	pb  *listenerv3.Listener
	cfg *listenerConfig
}
type routeEntry struct {
	pb    *routev3.RouteConfiguration
	table *routeTable
}
type clusterEntry struct {
	pb  *clusterv3.Cluster
	cfg *clusterConfig
}
type endpointEntry struct {
	pb    *endpointv3.ClusterLoadAssignment
	addrs []string
}
type secretEntry struct {
	pb   *tlsv3.Secret
	cert *tls.Certificate
}

func newStore() *store {
	return &store{listeners: map[string]*listenerEntry{}, routes: map[string]*routeEntry{},
		clusters: map[string]*clusterEntry{}, endpoints: map[string]*endpointEntry{}, secrets: map[string]*secretEntry{}}
}

// listenerReady reports whether every route configuration and SDS secret
// the listener fetches has arrived: Envoy's listener init targets (RDS
// subscriptions, and SdsApi's, source/common/secret/sds_api.cc), so a
// listener is not served before them.
func (s *store) listenerReady(l *listenerConfig) bool {
	for _, n := range l.rdsNames() {
		if s.routes[n] == nil {
			return false
		}
	}
	for _, n := range l.sdsNames() {
		if s.secrets[n] == nil {
			return false
		}
	}
	return true
}

// decoded is one received resource after validation and compilation.
type decoded struct {
	name  string
	value any // *listenerEntry, *routeEntry, *clusterEntry, *endpointEntry or *secretEntry
}

// decodeResource decodes a resource as the data plane at
// DefaultEnvoyVersion does (see decodeResourceAs).
func decodeResource(typeURL string, a *anypb.Any) (decoded, error) {
	return decodeResourceAs(typeURL, a, nil, defaultRegexEngine)
}

// decodeResourceAs unpacks a resource of type typeURL, drops the fields
// its Envoy version does not know (ignoreNewer, when set; Envoy does this
// while parsing, before validation), checks it the way Envoy would (proto
// validation rules), plus the data plane's honesty check (no set field it
// does not implement), then compiles it.
func decodeResourceAs(typeURL string, a *anypb.Any, ignoreNewer func(proto.Message), re regexEngine) (decoded, error) {
	if a.GetTypeUrl() != typeURL {
		return decoded{}, fmt.Errorf("resource of type %s in a %s response", a.GetTypeUrl(), typeURL)
	}
	msg, err := a.UnmarshalNew()
	if err != nil {
		return decoded{}, err
	}
	if ignoreNewer != nil {
		ignoreNewer(msg)
	}
	name := resourceName(msg)
	fail := func(err error) (decoded, error) { return decoded{}, fmt.Errorf("%s: %w", name, err) }
	if v, ok := msg.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return fail(err)
		}
	}
	if err := checkImplemented(msg); err != nil {
		return fail(err)
	}
	switch m := msg.(type) {
	case *listenerv3.Listener:
		cfg, err := compileListener(m, re)
		if err != nil {
			return fail(err)
		}
		return decoded{name, &listenerEntry{m, cfg}}, nil
	case *routev3.RouteConfiguration:
		t, err := compileRouteTable(m, re)
		if err != nil {
			return fail(err)
		}
		return decoded{name, &routeEntry{m, t}}, nil
	case *clusterv3.Cluster:
		cfg, err := compileCluster(m)
		if err != nil {
			return fail(err)
		}
		return decoded{name, &clusterEntry{m, cfg}}, nil
	case *endpointv3.ClusterLoadAssignment:
		addrs, err := endpointsOf(m)
		if err != nil {
			return fail(err)
		}
		return decoded{name, &endpointEntry{m, addrs}}, nil
	case *tlsv3.Secret:
		cert, err := compileSecret(m)
		if err != nil {
			return fail(err)
		}
		return decoded{name, &secretEntry{m, cert}}, nil
	}
	return decoded{}, fmt.Errorf("type %s not implemented", typeURL)
}

// decode decodes a resource as this data plane's Envoy version does: a
// field newer than it is ignored with a warning (ignoreNewerFields).
func (dp *DataPlane) decode(typeURL string, a *anypb.Any) (decoded, error) {
	d, err := decodeResourceAs(typeURL, a, func(m proto.Message) { dp.version.ignoreNewerFields(m, dp.unknownField) }, dp.target.regex)
	if err != nil {
		return d, err
	}
	return d, dp.target.static.checkNameFree(typeURL, d.name)
}

func resourceName(m proto.Message) string {
	switch r := m.(type) {
	case *endpointv3.ClusterLoadAssignment:
		return r.GetClusterName()
	case interface{ GetName() string }:
		return r.GetName()
	}
	return ""
}

// acceptLocked stores an accepted resource and updates cluster warming: a
// new or replaced cluster starts warming (reported as true), an assignment
// feeds the clusters that use its name (warming.go). dp.mu is held.
func (dp *DataPlane) acceptLocked(typeURL string, d decoded) bool {
	dp.store.put(typeURL, d)
	switch typeURL {
	case resourcev3.ClusterType:
		return dp.warmClusterLocked(d.value.(*clusterEntry))
	case resourcev3.EndpointType:
		dp.feedLocked(d.name)
	}
	return false
}

// put stores d under typeURL.
func (s *store) put(typeURL string, d decoded) {
	switch typeURL {
	case resourcev3.ListenerType:
		s.listeners[d.name] = d.value.(*listenerEntry)
	case resourcev3.RouteType:
		s.routes[d.name] = d.value.(*routeEntry)
	case resourcev3.ClusterType:
		s.clusters[d.name] = d.value.(*clusterEntry)
	case resourcev3.EndpointType:
		s.endpoints[d.name] = d.value.(*endpointEntry)
	case resourcev3.SecretType:
		s.secrets[d.name] = d.value.(*secretEntry)
	}
}

func (s *store) remove(typeURL, name string) {
	switch typeURL {
	case resourcev3.ListenerType:
		delete(s.listeners, name)
	case resourcev3.RouteType:
		delete(s.routes, name)
	case resourcev3.ClusterType:
		delete(s.clusters, name)
	case resourcev3.EndpointType:
		delete(s.endpoints, name)
	case resourcev3.SecretType:
		delete(s.secrets, name)
	}
}

func (s *store) names(typeURL string) []string {
	var ks []string
	switch typeURL {
	case resourcev3.ListenerType:
		ks = slices.Collect(maps.Keys(s.listeners))
	case resourcev3.RouteType:
		ks = slices.Collect(maps.Keys(s.routes))
	case resourcev3.ClusterType:
		ks = slices.Collect(maps.Keys(s.clusters))
	case resourcev3.EndpointType:
		ks = slices.Collect(maps.Keys(s.endpoints))
	case resourcev3.SecretType:
		ks = slices.Collect(maps.Keys(s.secrets))
	}
	sort.Strings(ks)
	return ks
}

// wantedNames are the RDS and SDS names the accepted listeners use and the
// EDS and SDS names the accepted clusters use.
func (s *store) wantedNames(typeURL string) map[string]bool {
	out := map[string]bool{}
	switch typeURL {
	case resourcev3.RouteType:
		for _, l := range s.listeners {
			for _, n := range l.cfg.rdsNames() {
				out[n] = true
			}
		}
	case resourcev3.SecretType:
		for _, l := range s.listeners {
			for _, n := range l.cfg.sdsNames() {
				out[n] = true
			}
		}
		for _, c := range s.clusters {
			if c.cfg.clientCertSDS != "" {
				out[c.cfg.clientCertSDS] = true
			}
		}
	case resourcev3.EndpointType:
		for _, c := range s.clusters {
			out[c.cfg.edsName] = true
		}
	}
	return out
}

// dropUnwanted forgets RDS and EDS resources no longer subscribed.
func (s *store) dropUnwanted(typeURL string, wanted map[string]bool) {
	for _, n := range s.names(typeURL) {
		if !wanted[n] {
			s.remove(typeURL, n)
		}
	}
}

// stream abstracts the state-of-the-world and delta ADS streams.
type stream interface {
	// subscribe sends the (initial or changed) subscription of st.
	subscribe(st *typeState, added, removed []string, initial bool) error
	// recv returns the next response, normalized.
	recv() (*response, error)
	// ack sends an ACK (errMsg == "") or a NACK for resp.
	ack(st *typeState, resp *response, errMsg string) error
}

// response is a SotW or delta response.
type response struct {
	typeURL   string
	version   string
	nonce     string
	resources []*anypb.Any
	// versions of resources (delta), parallel to resources.
	versions []string
	removed  []string
	delta    bool
}

// adsSession runs one ADS stream until it fails.
func (dp *DataPlane) adsSession(ctx context.Context, conn *grpc.ClientConn) error {
	client := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var s stream
	if dp.target.delta {
		ds, err := client.DeltaAggregatedResources(ctx)
		if err != nil {
			return err
		}
		s = &deltaStream{s: ds, node: dp.target.node}
	} else {
		ss, err := client.StreamAggregatedResources(ctx)
		if err != nil {
			return err
		}
		s = &sotwStream{s: ss, node: dp.target.node}
	}
	dp.mu.Lock()
	states := map[string]*typeState{}
	for _, t := range xdsTypes {
		st := &typeState{url: t, wildcard: t == resourcev3.ListenerType || t == resourcev3.ClusterType,
			names: map[string]bool{}, version: dp.versions[t], versions: map[string]string{}}
		if !st.wildcard {
			st.names = dp.store.wantedNames(t)
		}
		for _, n := range dp.store.names(t) {
			st.versions[n] = dp.resourceVersions[t+"/"+n]
		}
		states[t] = st
	}
	dp.mu.Unlock()
	for _, t := range xdsTypes {
		st := states[t]
		if !st.wildcard && len(st.names) == 0 {
			continue
		}
		if err := s.subscribe(st, sortedKeys(st.names), nil, true); err != nil {
			return err
		}
	}
	for {
		resp, err := s.recv()
		if err != nil {
			return err
		}
		dp.setConnected(true)
		st := states[resp.typeURL]
		if st == nil {
			continue
		}
		st.nonce = resp.nonce
		if err := dp.handle(s, states, st, resp); err != nil {
			return err
		}
	}
}

// handle validates and applies one response, ACKs or NACKs it, and updates
// the RDS and EDS subscriptions. A response with any invalid resource is
// rejected whole and changes nothing.
func (dp *DataPlane) handle(s stream, states map[string]*typeState, st *typeState, resp *response) error {
	var decodedAll []decoded
	var errs []string
	for _, a := range resp.resources {
		d, err := dp.decode(resp.typeURL, a)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		decodedAll = append(decodedAll, d)
	}
	if len(errs) > 0 {
		msg := strings.Join(errs, "; ")
		dp.recordNACK(resp, msg)
		return s.ack(st, resp, msg)
	}
	dp.mu.Lock()
	if !resp.delta && st.wildcard {
		// A SotW LDS or CDS response is the full set.
		keep := map[string]bool{}
		for _, d := range decodedAll {
			keep[d.name] = true
		}
		for _, n := range dp.store.names(resp.typeURL) {
			if !keep[n] {
				dp.store.remove(resp.typeURL, n)
			}
		}
	}
	rewarm := false // a cluster started warming and its EDS name is subscribed
	for i, d := range decodedAll {
		if dp.acceptLocked(resp.typeURL, d) && states[resourcev3.EndpointType].names[d.value.(*clusterEntry).cfg.edsName] {
			rewarm = true
		}
		if resp.delta {
			st.versions[d.name] = resp.versions[i]
			dp.resourceVersions[resp.typeURL+"/"+d.name] = resp.versions[i]
		}
	}
	for _, n := range resp.removed {
		dp.store.remove(resp.typeURL, n)
		delete(st.versions, n)
		delete(dp.resourceVersions, resp.typeURL+"/"+n)
	}
	st.version = resp.version
	dp.versions[resp.typeURL] = resp.version
	// Follow-up subscriptions: RDS for the listeners, EDS for the clusters.
	type change struct {
		st             *typeState
		added, removed []string
	}
	var changes []change
	for _, t := range []string{resourcev3.EndpointType, resourcev3.RouteType, resourcev3.SecretType} {
		o := states[t]
		want := dp.store.wantedNames(t)
		var added, removed []string
		for n := range want {
			if !o.names[n] {
				added = append(added, n)
			}
		}
		for n := range o.names {
			if !want[n] {
				removed = append(removed, n)
				delete(o.versions, n)
			}
		}
		switch {
		case len(added)+len(removed) > 0:
			sort.Strings(added)
			sort.Strings(removed)
			o.names = want
			dp.store.dropUnwanted(t, want)
			changes = append(changes, change{o, added, removed})
		case t == resourcev3.EndpointType && rewarm && !resp.delta:
			// Envoy's SotW mux sends a request for every added watch,
			// even when it names nothing new (warming.go).
			changes = append(changes, change{o, nil, nil})
		}
	}
	dp.publishLocked()
	dp.mu.Unlock()
	dp.counters.acks.Add(1)
	if err := s.ack(st, resp, ""); err != nil {
		return err
	}
	for _, c := range changes {
		if err := s.subscribe(c.st, c.added, c.removed, false); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	ks := slices.Collect(maps.Keys(m))
	sort.Strings(ks)
	return ks
}

func nackStatus(msg string) *statuspb.Status {
	return &statuspb.Status{Code: int32(codes.InvalidArgument), Message: msg}
}

// sotwStream is StreamAggregatedResources.
type sotwStream struct {
	s        discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node     *corev3.Node
	sentNode bool
}

func (s *sotwStream) request(st *typeState, nonce string) *discoveryv3.DiscoveryRequest {
	r := &discoveryv3.DiscoveryRequest{TypeUrl: st.url, VersionInfo: st.version, ResponseNonce: nonce}
	if !st.wildcard {
		r.ResourceNames = sortedKeys(st.names)
	}
	if !s.sentNode {
		r.Node = s.node
		s.sentNode = true
	}
	return r
}

func (s *sotwStream) subscribe(st *typeState, _, _ []string, initial bool) error {
	nonce := st.nonce
	if initial {
		nonce = ""
	}
	return s.s.Send(s.request(st, nonce))
}

func (s *sotwStream) recv() (*response, error) {
	r, err := s.s.Recv()
	if err != nil {
		return nil, err
	}
	return &response{typeURL: r.GetTypeUrl(), version: r.GetVersionInfo(), nonce: r.GetNonce(), resources: r.GetResources()}, nil
}

func (s *sotwStream) ack(st *typeState, resp *response, errMsg string) error {
	r := s.request(st, resp.nonce)
	if errMsg != "" {
		r.ErrorDetail = nackStatus(errMsg)
	}
	return s.s.Send(r)
}

// deltaStream is DeltaAggregatedResources.
type deltaStream struct {
	s        discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node     *corev3.Node
	sentNode bool
}

func (s *deltaStream) subscribe(st *typeState, added, removed []string, initial bool) error {
	r := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: st.url, ResourceNamesSubscribe: added, ResourceNamesUnsubscribe: removed}
	if initial {
		r.InitialResourceVersions = map[string]string{}
		for n, v := range st.versions {
			r.InitialResourceVersions[n] = v
		}
	}
	if !s.sentNode {
		r.Node = s.node
		s.sentNode = true
	}
	return s.s.Send(r)
}

func (s *deltaStream) recv() (*response, error) {
	r, err := s.s.Recv()
	if err != nil {
		return nil, err
	}
	resp := &response{typeURL: r.GetTypeUrl(), version: r.GetSystemVersionInfo(), nonce: r.GetNonce(), removed: r.GetRemovedResources(), delta: true}
	for _, res := range r.GetResources() {
		if res.GetResource() == nil {
			return nil, errors.New("delta resource without a body")
		}
		resp.resources = append(resp.resources, res.GetResource())
		resp.versions = append(resp.versions, res.GetVersion())
	}
	return resp, nil
}

func (s *deltaStream) ack(st *typeState, resp *response, errMsg string) error {
	r := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: st.url, ResponseNonce: resp.nonce}
	if errMsg != "" {
		r.ErrorDetail = nackStatus(errMsg)
	}
	return s.s.Send(r)
}
