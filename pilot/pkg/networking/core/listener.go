// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// portGroup is the Gateway listeners that share one port: Envoy has one
// listener and one route configuration per port.
type portGroup struct {
	port      uint32
	tls       bool
	listeners []model.Listener
}

// groupByPort groups gw's HTTP and HTTPS listeners by port, ports
// ascending, listeners in spec order (TLS and TCP listeners are
// streamGroups'). A port mixing HTTP and HTTPS listeners is an error: the
// controller marks such listeners Conflicted and leaves them out.
func groupByPort(gw *model.Gateway) ([]portGroup, error) {
	byPort := map[uint32]*portGroup{}
	for _, l := range gw.Listeners {
		if model.StreamProtocol(l.Protocol) {
			continue // streamGroups
		}
		isTLS := l.Protocol == gwv1.HTTPSProtocolType
		g := byPort[l.Port]
		if g == nil {
			g = &portGroup{port: l.Port, tls: isTLS}
			byPort[l.Port] = g
		} else if g.tls != isTLS {
			return nil, fmt.Errorf("gateway %s: port %d mixes HTTP and HTTPS listeners", gw.ResourceName(), l.Port)
		}
		g.listeners = append(g.listeners, l)
	}
	out := make([]portGroup, 0, len(byPort))
	for _, g := range byPort {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].port < out[j].port })
	return out, nil
}

// BuildListeners returns one Listener per distinct Gateway listener port
// (a TLS or TCP port only while some route gets its connections:
// buildStreamListener), sorted by port, named ListenerName(port), bound
// to 0.0.0.0:<port>.
//
// Each HTTP and HTTPS one has an HTTP connection manager (network filter
// envoy.filters.network.http_connection_manager) that:
//   - fetches routes over RDS (rds.route_config_name RouteConfigName, or
//     ChainRouteConfigName for each chain of an HTTPS port; config source
//     ADS);
//   - accepts WebSocket upgrades (upgrade_configs websocket);
//   - normalizes the path (normalize_path: RFC 3986 dot segments resolved)
//     before routes match, so "/public/../admin" is matched, and sent
//     upstream, as "/admin" (architecture/xds.md, "Decisions");
//   - removes a client's X-Gateway-Model-Name first
//     (early_header_mutation_extensions, earlyHeaderMutations);
//   - runs the listeners' pre-routing filters (Listener.filters.requests,
//     listenerfilter.go: each disabled, enabled on its own listener's
//     virtual hosts), then the HTTP filters cors, then one ext_authz filter
//     per distinct ExternalAuth filter of the Gateway's routes
//     (gatewayExtAuthz, sorted by name; each disabled until a route enables
//     it, extAuthzFilter), then ext_proc when opts.InferenceEnabled (see
//     extProcBaseFilter: disabled and inert until a route enables it), then
//     router. ext_authz before ext_proc: a request the authorization server
//     denies never reaches an EPP or a model server. CORS first (Istio puts ext_proc first) so that a reply
//     ext_proc makes while decoding a CORS request (an EPP error or
//     ImmediateResponse) still gets the CORS headers; architecture/xds.md
//     gives the reasoning, and preflightRoute why no order keeps CORS
//     preflights from the EPP.
//
// HTTPS ports (Gateway listener protocol HTTPS) get the TLS inspector
// listener filter and one filter chain per Gateway listener, named after
// it: filter_chain_match.server_names is the listener's hostname (none for
// a listener without one, whose chain Envoy picks when no server name
// matches), and a DownstreamTlsContext fetches the listener's Secret over
// SDS on the ADS stream (SecretName, kubernetes-gateway://<ns>/<name>, as
// Istio names Gateway API certificates) and offers ALPN h2 and http/1.1.
// Each chain's connection manager has its own route configuration
// (ChainRouteConfigName), holding only the hostnames its listener owns and
// a 421 for those of the port's other listeners (buildRouteConfiguration).
// A certificate's rotation changes only the SDS resource, never the
// listener, so Envoy does not drain it.
func BuildListeners(gw *model.Gateway, opts Options) ([]*listenerv3.Listener, error) {
	if gw.ClassParametersError != "" {
		return nil, fmt.Errorf("invalid parameters (GatewayClass or Gateway): %s", gw.ClassParametersError)
	}
	opts.eppBodyMode, opts.gatewayNamespace = gw.EPPBodyMode, gw.Namespace
	opts.extAuthz = gatewayExtAuthz(gw)
	groups, err := groupByPort(gw)
	if err != nil {
		return nil, err
	}
	streams, err := streamGroups(gw)
	if err != nil {
		return nil, err
	}
	out := make([]*listenerv3.Listener, 0, len(groups)+len(streams))
	for _, g := range groups {
		l, err := buildListener(g, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	for _, g := range streams {
		l, err := buildStreamListener(g, opts)
		if err != nil {
			return nil, err
		}
		if l != nil {
			out = append(out, l)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].GetAddress().GetSocketAddress().GetPortValue() < out[j].GetAddress().GetSocketAddress().GetPortValue()
	})
	return out, nil
}

func buildListener(g portGroup, opts Options) (*listenerv3.Listener, error) {
	hcmFilters := func(rc string, chain int) ([]*listenerv3.Filter, error) {
		hcm, err := buildHCM(rc, opts, hcmListenerFilters(g, chain))
		if err != nil {
			return nil, err
		}
		hcmAny, err := toAny(hcm)
		if err != nil {
			return nil, err
		}
		return []*listenerv3.Filter{{Name: NetworkFilterHCM, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcmAny}}}, nil
	}
	l := &listenerv3.Listener{
		Name: ListenerName(g.port),
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address:       "0.0.0.0",
			PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: g.port},
		}}},
	}
	if !g.tls {
		filters, err := hcmFilters(RouteConfigName(g.port, false), -1)
		if err != nil {
			return nil, err
		}
		l.FilterChains = []*listenerv3.FilterChain{{Filters: filters}}
		return l, nil
	}
	for i, gl := range g.listeners {
		ts, err := downstreamTLS(gl, []string{ALPNH2, ALPNHTTP11})
		if err != nil {
			return nil, err
		}
		filters, err := hcmFilters(ChainRouteConfigName(g.port, gl.Name), i)
		if err != nil {
			return nil, err
		}
		fc := &listenerv3.FilterChain{Name: gl.Name, Filters: filters, TransportSocket: ts}
		if gl.Hostname != "" {
			fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: []string{gl.Hostname}}
		}
		l.FilterChains = append(l.FilterChains, fc)
	}
	// Envoy needs a TLS inspector to read SNI for filter_chain_match.
	inspector, err := toAny(&tlsinspectorv3.TlsInspector{})
	if err != nil {
		return nil, err
	}
	l.ListenerFilters = []*listenerv3.ListenerFilter{{
		Name:       "envoy.filters.listener.tls_inspector",
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: inspector},
	}}
	return l, nil
}

func buildHCM(rc string, opts Options, lfs []hcmListenerFilter) (*hcmv3.HttpConnectionManager, error) {
	corsAny, err := toAny(&corsv3.Cors{})
	if err != nil {
		return nil, err
	}
	routerAny, err := toAny(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	var filters []*hcmv3.HttpFilter
	for _, lf := range lfs {
		f, err := listenerHTTPFilter(lf)
		if err != nil {
			return nil, err
		}
		filters = append(filters, f)
	}
	filters = append(filters, &hcmv3.HttpFilter{Name: FilterCORS, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: corsAny}})
	for _, ea := range opts.extAuthz {
		f, err := extAuthzFilter(ea)
		if err != nil {
			return nil, err
		}
		// As for the EPP's filter below: with listener filters the route
		// that asks for the check may be selected only after the filters
		// were created, so the filter is created for every request and
		// every virtual host turns it off unless its route turns it on
		// (disableExtAuthz); a check is never skipped for a route that
		// asks for it.
		f.Disabled = len(lfs) == 0
		filters = append(filters, f)
	}
	if opts.InferenceEnabled {
		ep, err := extProcBaseFilter(opts.eppBodyMode)
		if err != nil {
			return nil, err
		}
		// A listener filter may change the request so that route
		// selection finds a pool route only after the filters were
		// created: the EPP's filter is then created for every request
		// (without a pool route's override it sends nothing).
		ep.Disabled = len(lfs) == 0
		filters = append(filters, ep)
	}
	early, err := earlyHeaderMutations()
	if err != nil {
		return nil, err
	}
	filters = append(filters, &hcmv3.HttpFilter{Name: FilterRouter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: routerAny}})
	return &hcmv3.HttpConnectionManager{
		StatPrefix: rc,
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: rc,
			ConfigSource:    adsConfigSource(),
		}},
		// WebSocket upgrades are accepted (the Gateway API's
		// kubernetes.io/ws backend protocol; Istio's gateways accept them
		// the same way); any other upgrade is refused with 403.
		UpgradeConfigs:   []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}},
		UseRemoteAddress: wrapperspb.Bool(true),
		NormalizePath:    wrapperspb.Bool(true),
		HttpFilters:      filters,
		// A client's X-Gateway-Model-Name is removed before route
		// selection and every filter (earlyHeaderMutations).
		EarlyHeaderMutationExtensions: early,
	}, nil
}

// downstreamTLS terminates TLS with the listener's certificates, fetched by
// name over SDS on the ADS stream, advertising alpn (h2 and http/1.1 on an
// HTTPS listener; none in front of a TCP proxy). A listener
// with client validation (the Gateway's spec.tls.frontend) gets its CA
// bundle inline as trusted_ca (a CA bundle is public, so it needs no SDS
// secret of its own; a change of it replaces the filter chain, which Envoy
// drains): AllowValidOnly sets require_client_certificate, so a client
// without a certificate fails the handshake as one whose certificate does
// not verify; AllowInsecureFallback sets trust_chain_verification
// ACCEPT_UNTRUSTED and does not require one.
func downstreamTLS(l model.Listener, alpn []string) (*corev3.TransportSocket, error) {
	if l.TLS == nil || len(l.TLS.CertificateRefs) == 0 {
		return nil, fmt.Errorf("listener %s: %s without certificateRefs", l.Name, l.Protocol)
	}
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		AlpnProtocols: alpn,
	}}
	for _, ref := range l.TLS.CertificateRefs {
		if strings.TrimSpace(ref) == "" {
			return nil, fmt.Errorf("listener %s: empty certificateRef", l.Name)
		}
		ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = append(ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs,
			&tlsv3.SdsSecretConfig{Name: SecretName(ref), SdsConfig: adsConfigSource()})
	}
	if cv := l.TLS.ClientValidation; cv != nil {
		ca, err := ParseCABundle(cv.CACertificates)
		if err != nil {
			return nil, fmt.Errorf("listener %s: client validation CA: %w", l.Name, err)
		}
		vc := &tlsv3.CertificateValidationContext{
			TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: ca}},
		}
		if cv.AllowInsecureFallback {
			// The certificate is still asked for (Envoy requests one
			// whenever trusted_ca is set), but neither its absence nor a
			// failed verification ends the handshake.
			vc.TrustChainVerification = tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED
		} else {
			ctx.RequireClientCertificate = wrapperspb.Bool(true)
		}
		ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
	}
	a, err := toAny(ctx)
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: TransportSocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}, nil
}
