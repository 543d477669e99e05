// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"maps"
	"strconv"

	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	earlyhmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// Pre-routing listener filters (Gateway API Listener.filters.requests,
// GEP-5224) in Envoy terms. architecture/xds.md ("Listener filters") tells the
// reasoning; in short:
//
//   - Each filter of each listener is its own HTTP filter of the
//     connection manager, named ListenerFilterName(listener, index), placed
//     before every other filter (CORS, the EPP's ext_proc, the router), in
//     listener order and then in the listener's list order: the list order
//     is the order Envoy runs them, always, so InvalidListenerFilterOrder
//     never applies.
//   - Each is disabled in the connection manager (HttpFilter.disabled) and
//     enabled by typed_per_filter_config on the virtual hosts of its own
//     listener only (listenerFilterVirtualHost). Envoy decides which
//     disabled filters to create from the route it selects when the
//     request's headers arrive (FilterChainUtility::
//     createFilterChainForFactories asks the route's filterDisabled, which
//     falls back to the virtual host's): one listener's filter is never
//     created for a request whose Host belongs to another listener's
//     virtual host, or to none. Listeners of one HTTP port share a
//     connection manager, so this is what keeps one tenant's filter off
//     another tenant's traffic.
//   - So that the filters are created even when no route of the listener
//     matches the request as the client sent it (the routes of a body-based
//     router's listener match a header only the router sets), each of the
//     listener's virtual hosts ends with listenerFilterFallbackRoute, a
//     catch-all answering 404 as Envoy does when no route matches, and the
//     listener's own hostname (or "*") always has a virtual host.
//   - route_cache_action CLEAR: every header mutation a processor makes
//     clears the route cache, so route selection runs again, once, on the
//     request as the filters left it, whether or not the processor set
//     clear_route_cache (ProcessorState::clearRouteCache). Without a
//     mutation the request is what route selection already saw.
//   - The EPP's ext_proc filter is enabled in a connection manager with
//     listener filters (extProcBaseFilter): it must run for a pool route
//     that route selection finds only after a listener filter changed the
//     request, and the filters created are decided before that. Without a
//     per-route override it sends nothing and opens no stream.
//   - mutation_rules: Host, :authority, :scheme and :method (allow_all_routing
//     false) and x-envoy-* headers (allow_envoy false) are never changed by a
//     processor; such a mutation is ignored and counted (disallow_is_error
//     false), the Gateway API's "SHOULD ignore". Listener selection, which
//     is by Host, therefore never changes after a filter ran. No receiving
//     metadata namespace is set, so no listener filter can set the EPP's
//     pick (envoy.lb).
//   - The processing mode and failure_mode_allow come in the virtual
//     host's ExtProcPerRoute (Envoy refuses failure_mode_allow with a
//     FULL_DUPLEX_STREAMED body in the filter's own config, as for the EPP).

// ListenerFilterName is the HTTP filter name (and typed_per_filter_config
// key) of filter index of the listener named listener.
func ListenerFilterName(listener string, index int) string {
	return "infermesh.listener_filter/" + listener + "/" + strconv.Itoa(index)
}

// ModelNameHeader is the header GIE's body-based router sets from the
// request body's model field (X-Gateway-Model-Name). Every connection
// manager removes a client's copy before anything else runs
// (earlyHeaderMutations), so that only a listener filter can set it.
const ModelNameHeader = "x-gateway-model-name"

// EarlyHeaderMutation is the early_header_mutation_extensions name of the
// header mutation every connection manager carries.
const EarlyHeaderMutation = "envoy.http.early_header_mutation.header_mutation"

// ListenerFilterFallbackRoute is the name of the catch-all route that ends
// each virtual host of a listener with filters.
const ListenerFilterFallbackRoute = "infermesh.listener_filters.no_route"

// hcmListenerFilter is one listener filter of a connection manager.
type hcmListenerFilter struct {
	listener string
	index    int
	filter   model.ListenerFilter
}

// hcmListenerFilters are the listener filters a connection manager of port
// group g carries: every listener's on an HTTP port (chain < 0), the
// chain's listener's on an HTTPS port.
func hcmListenerFilters(g portGroup, chain int) []hcmListenerFilter {
	var out []hcmListenerFilter
	for i, l := range g.listeners {
		if chain >= 0 && i != chain {
			continue
		}
		for j, f := range l.Filters {
			out = append(out, hcmListenerFilter{listener: l.Name, index: j, filter: f})
		}
	}
	return out
}

// groupHasListenerFilters reports whether any listener of g has filters,
// or filters that do not resolve.
func groupHasListenerFilters(g portGroup) bool {
	for _, l := range g.listeners {
		if len(l.Filters) > 0 || l.FilterError != "" {
			return true
		}
	}
	return false
}

// listenerHTTPFilter is the connection manager's HTTP filter for one
// listener filter, by type: one function per type (ExtensionRef:
// processorHTTPFilter).
func listenerHTTPFilter(f hcmListenerFilter) (*hcmv3.HttpFilter, error) {
	name := ListenerFilterName(f.listener, f.index)
	switch f.filter.Type {
	case gwv1.ListenerFilterExtensionRef:
		if f.filter.Processor == nil {
			return nil, fmt.Errorf("listener %s: filter %d: ExtensionRef without its ExternalProcessor", f.listener, f.index)
		}
		return processorHTTPFilter(name, f.filter.Processor)
	}
	return nil, fmt.Errorf("listener %s: filter %d: type %q is not implemented", f.listener, f.index, f.filter.Type)
}

// listenerFilterPerRoute is the typed_per_filter_config value that enables
// one listener filter on its listener's virtual hosts, by type.
func listenerFilterPerRoute(f model.ListenerFilter) (*anypb.Any, error) {
	switch f.Type {
	case gwv1.ListenerFilterExtensionRef:
		if f.Processor == nil {
			return nil, fmt.Errorf("ExtensionRef without its ExternalProcessor")
		}
		return toAny(processorPerRoute(f.Processor))
	}
	return nil, fmt.Errorf("listener filter type %q is not implemented", f.Type)
}

// processorHTTPFilter is the ext_proc HTTP filter of an ExternalProcessor
// listener filter: disabled, inert without its virtual host's override
// (headers and trailers SKIP, bodies NONE), route_cache_action CLEAR, the
// mutation rules above, the processor's cluster and message_timeout
// (which exists only at filter level).
func processorHTTPFilter(name string, p *model.ExternalProcessor) (*hcmv3.HttpFilter, error) {
	cfg := &extprocv3.ExternalProcessor{
		GrpcService: grpcService(ProcessorClusterName(p)),
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode:   extprocv3.ProcessingMode_SKIP,
			ResponseHeaderMode:  extprocv3.ProcessingMode_SKIP,
			RequestBodyMode:     extprocv3.ProcessingMode_NONE,
			ResponseBodyMode:    extprocv3.ProcessingMode_NONE,
			RequestTrailerMode:  extprocv3.ProcessingMode_SKIP,
			ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
		},
		RouteCacheAction: extprocv3.ExternalProcessor_CLEAR,
		MutationRules: &mutationrulesv3.HeaderMutationRules{
			AllowAllRouting: wrapperspb.Bool(false),
			AllowEnvoy:      wrapperspb.Bool(false),
			DisallowIsError: wrapperspb.Bool(false),
		},
	}
	if p.MessageTimeout > 0 {
		cfg.MessageTimeout = durationpb.New(p.MessageTimeout)
	}
	a, err := toAny(cfg)
	if err != nil {
		return nil, err
	}
	return &hcmv3.HttpFilter{Name: name, Disabled: true, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}}, nil
}

// processorPerRoute is the ExtProcPerRoute that turns a processor's filter
// on for a virtual host: its processing mode and failure_mode_allow.
func processorPerRoute(p *model.ExternalProcessor) *extprocv3.ExtProcPerRoute {
	return &extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{
		ProcessingMode:   processorMode(p),
		FailureModeAllow: wrapperspb.Bool(p.FailOpen),
	}}}
}

// processorMode is an ExternalProcessor's ProcessingMode: trailers go with
// a FULL_DUPLEX_STREAMED body (Envoy requires them SEND in that mode) and
// are skipped otherwise.
func processorMode(p *model.ExternalProcessor) *extprocv3.ProcessingMode {
	hdr := func(send bool) extprocv3.ProcessingMode_HeaderSendMode {
		if send {
			return extprocv3.ProcessingMode_SEND
		}
		return extprocv3.ProcessingMode_SKIP
	}
	body := func(streamed bool) extprocv3.ProcessingMode_BodySendMode {
		if streamed {
			return extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED
		}
		return extprocv3.ProcessingMode_NONE
	}
	return &extprocv3.ProcessingMode{
		RequestHeaderMode:   hdr(p.RequestHeaders),
		ResponseHeaderMode:  hdr(p.ResponseHeaders),
		RequestBodyMode:     body(p.RequestBodyStreamed),
		ResponseBodyMode:    body(p.ResponseBodyStreamed),
		RequestTrailerMode:  hdr(p.RequestBodyStreamed),
		ResponseTrailerMode: hdr(p.ResponseBodyStreamed),
	}
}

// ProcessorClusterName is the cluster of an ExternalProcessor's Service
// port: outbound|<port>||<host>, as every Service port's.
func ProcessorClusterName(p *model.ExternalProcessor) string {
	return ClusterName(uint32(p.Port), p.Host)
}

// listenerFilterConfig is the typed_per_filter_config of the virtual
// hosts of listener l: one entry per filter; nil when it has none.
func listenerFilterConfig(l model.Listener) (map[string]*anypb.Any, error) {
	if len(l.Filters) == 0 {
		return nil, nil
	}
	out := make(map[string]*anypb.Any, len(l.Filters))
	for i, f := range l.Filters {
		a, err := listenerFilterPerRoute(f)
		if err != nil {
			return nil, fmt.Errorf("listener %s: filter %d: %w", l.Name, i, err)
		}
		out[ListenerFilterName(l.Name, i)] = a
	}
	return out, nil
}

// listenerFilterVirtualHost makes vh one of a listener with filters: cfg
// (listenerFilterConfig) enables them, and the fallback route ends it.
func listenerFilterVirtualHost(vh *routev3.VirtualHost, cfg map[string]*anypb.Any) {
	vh.TypedPerFilterConfig = maps.Clone(cfg)
	vh.Routes = append(vh.Routes, listenerFilterFallbackRoute())
}

// ListenerFilterErrorRoute is the name of the route that answers every
// request of a listener whose filters do not resolve.
const ListenerFilterErrorRoute = "infermesh.listener_filters.unresolved"

// filterErrorVirtualHost makes vh one of a listener whose filters do not
// resolve (model.Listener.FilterError): every request gets a 500, never
// its routes without the filters the listener asks for.
func filterErrorVirtualHost(vh *routev3.VirtualHost) {
	vh.Routes = []*routev3.Route{{
		Name:   ListenerFilterErrorRoute,
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 500}},
	}}
}

// listenerFilterFallbackRoute matches every request a listener's virtual
// host gets and answers 404, as Envoy does when no route matches: it is
// the route Envoy selects before the filters ran when no other matches,
// so that they are created; once a filter changed the request and route
// selection ran again, it is what an unmatched request gets.
func listenerFilterFallbackRoute() *routev3.Route {
	return &routev3.Route{
		Name:   ListenerFilterFallbackRoute,
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 404}},
	}
}

// earlyHeaderMutations remove a client's X-Gateway-Model-Name before
// Envoy selects a route or runs a filter (HttpConnectionManager.
// early_header_mutation_extensions run first in ActiveStream::
// decodeHeaders). Route-level request_headers_to_remove would be too late:
// the router applies it once the route, chosen with the client's header,
// is final. Removing it in a filter would be too late too: the route
// Envoy selected with the client's header stays cached unless a filter
// changes a header afterwards, which a body-based router does not do for
// a body without a model. Every connection manager removes it, whether or
// not any listener has a filter, so that the rule does not depend on
// another tenant's listener on the same port.
func earlyHeaderMutations() ([]*corev3.TypedExtensionConfig, error) {
	a, err := toAny(&earlyhmv3.HeaderMutation{Mutations: []*mutationrulesv3.HeaderMutation{{
		Action: &mutationrulesv3.HeaderMutation_Remove{Remove: ModelNameHeader},
	}}})
	if err != nil {
		return nil, err
	}
	return []*corev3.TypedExtensionConfig{{Name: EarlyHeaderMutation, TypedConfig: a}}, nil
}

// groupListenerFilterConfig is listenerFilterConfig of each listener of g
// the configuration serves (only the chain's on an HTTPS port), by index;
// nil entries for listeners without filters. Two listeners of one port
// with one hostname, either with filters, are an error: which one a
// request belongs to would be undecided (the controller never passes
// such listeners: they conflict).
func groupListenerFilterConfig(g portGroup, chain int) ([]map[string]*anypb.Any, error) {
	out := make([]map[string]*anypb.Any, len(g.listeners))
	for i, l := range g.listeners {
		if chain >= 0 && i != chain {
			continue
		}
		cfg, err := listenerFilterConfig(l)
		if err != nil {
			return nil, err
		}
		out[i] = cfg
		if chain >= 0 {
			continue
		}
		for j := range i {
			o := g.listeners[j]
			if o.Hostname == l.Hostname && (len(o.Filters) > 0 || len(l.Filters) > 0) {
				return nil, fmt.Errorf("listeners %s and %s of port %d have the same hostname %q and listener filters", o.Name, l.Name, g.port, l.Hostname)
			}
		}
	}
	return out, nil
}

// vhostListener is the index in g.listeners of the listener whose
// requests the virtual host of hostname h gets: the chain's on an HTTPS
// port, else the one whose hostname owns h (ownerHostname); -1 for none
// (then no listener filter is enabled on it).
func vhostListener(g portGroup, chain int, listenerHosts []string, h string) int {
	if chain >= 0 {
		return chain
	}
	owner := ownerHostname(h, listenerHosts)
	for i, l := range g.listeners {
		if l.Hostname == owner {
			return i
		}
	}
	return -1
}

// disableExtAuthz gives every virtual host of a connection manager with
// listener filters an ExtAuthzPerRoute disabled for each ext_authz filter
// of the Gateway: there those filters are enabled in the connection
// manager (buildHCM), and a route that asks for a check turns its filter
// back on with its own, more specific, entry (ext_authz takes the most
// specific per-route configuration).
func disableExtAuthz(vhs []*routev3.VirtualHost, eas []*model.ExternalAuth) error {
	if len(eas) == 0 {
		return nil
	}
	off, err := toAny(&extauthzv3.ExtAuthzPerRoute{Override: &extauthzv3.ExtAuthzPerRoute_Disabled{Disabled: true}})
	if err != nil {
		return err
	}
	for _, vh := range vhs {
		if vh.TypedPerFilterConfig == nil {
			vh.TypedPerFilterConfig = map[string]*anypb.Any{}
		}
		for _, ea := range eas {
			vh.TypedPerFilterConfig[extAuthzName(ea)] = off
		}
	}
	return nil
}

// hasListenerFilters reports whether any listener of gw has filters.
func hasListenerFilters(gw *model.Gateway) bool {
	for _, l := range gw.Listeners {
		if len(l.Filters) > 0 {
			return true
		}
	}
	return false
}
