// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	earlyhmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

const networkFilterHCM = "envoy.filters.network.http_connection_manager"

// listenerConfig is a compiled Listener: one plain-HTTP filter chain whose
// only network filter is the HTTP connection manager, with routes over RDS
// (LDS) or inline (a static listener of the bootstrap, static.go); or, for
// a listener terminating TLS (tlsChains set, tls.go), the filter chains
// each with its own connection manager, compiled as a listenerConfig of
// its own.
type listenerConfig struct {
	name    string
	address string
	port    uint32
	rdsName string
	// routes is the inline route_config of a static listener; nil for a
	// listener whose routes come over RDS.
	routes *routeTable
	// stripPort is strip_any_host_port.
	stripPort bool
	// upgrades are the upgrade types upgrade_configs allows (lower case).
	upgrades map[string]bool
	// normalizePath is normalize_path (path_utility.go).
	normalizePath bool
	// filters are the HTTP filters before the router, in order.
	filters []httpFilter
	// earlyRemove are the headers the connection manager's early header
	// mutations remove before route selection (lower case).
	earlyRemove []string
	// tlsChains are the filter chains of a listener that terminates TLS,
	// in configuration order (tls.go); nil for a plain-HTTP listener, whose
	// connection manager is the fields above.
	tlsChains []*tlsChain
	// stream is set for a listener whose filter chains end in tcp_proxy
	// (tcp_proxy.go); it has no connection manager.
	stream *streamListener
}

// rdsNames are the route configurations the listener's connection
// managers fetch.
func (lc *listenerConfig) rdsNames() []string {
	if lc.stream != nil {
		return nil
	}
	if lc.tlsChains == nil {
		return []string{lc.rdsName}
	}
	var out []string
	for _, c := range lc.tlsChains {
		out = append(out, c.hcm.rdsName)
	}
	return out
}

// sdsNames are the SDS secrets the listener's filter chains fetch.
func (lc *listenerConfig) sdsNames() []string {
	if lc.stream != nil {
		return lc.stream.sdsNames()
	}
	var out []string
	for _, c := range lc.tlsChains {
		out = append(out, c.sdsName)
	}
	return out
}

type httpFilter struct {
	// name is HttpFilter.name, the key of its per-filter configuration.
	name string
	// kind is filterCORS, filterExtProc or filterExtAuthz.
	kind     string
	disabled bool
	extProc  *extprocv3.ExternalProcessor // for ext_proc
	extAuthz *extAuthzConfig              // for ext_authz (ext_authz.go)
}

// compileListener compiles a listener received over LDS: its routes come
// over RDS from ADS. A listener with listener filters or a transport socket
// on a filter chain is a TLS listener (compileTLSListener); one with the
// tcp_proxy network filter a TCP proxy (compileTCPProxyListener).
func compileListener(l *listenerv3.Listener, re regexEngine) (*listenerConfig, error) {
	if usesTCPProxy(l) {
		return compileTCPProxyListener(l)
	}
	if len(l.GetListenerFilters()) > 0 || slices.ContainsFunc(l.GetFilterChains(), func(fc *listenerv3.FilterChain) bool {
		return fc.GetTransportSocket() != nil || fc.GetFilterChainMatch() != nil
	}) {
		return compileTLSListener(l, re)
	}
	lc, hcm, err := compileHCMListener(l, re)
	if err != nil {
		return nil, err
	}
	if err := compileRDS(lc, hcm); err != nil {
		return nil, err
	}
	return lc, nil
}

// compileRDS takes the connection manager's route specifier: routes over
// RDS from ADS, waiting for them without a bound.
func compileRDS(lc *listenerConfig, hcm *hcmv3.HttpConnectionManager) error {
	rds := hcm.GetRds()
	if rds == nil || rds.GetConfigSource().GetAds() == nil {
		return errors.New("route_config must come over RDS from ADS")
	}
	if t := rds.GetConfigSource().GetInitialFetchTimeout(); t != nil && t.AsDuration() != 0 {
		// A listener waits for its route configuration without a bound
		// (dataplane.go); a positive timeout would need Envoy's NullConfig
		// routes after it fires (RdsRouteConfigSubscription::onConfigUpdateFailed).
		return errors.New("rds.config_source.initial_fetch_timeout other than 0 not implemented")
	}
	lc.rdsName = rds.GetRouteConfigName()
	return nil
}

// compileHCMListener compiles what every plain-HTTP listener shares: the
// address, the one filter chain and its HTTP connection manager with its
// HTTP filters; the caller compiles the HCM's route specifier.
func compileHCMListener(l *listenerv3.Listener, re regexEngine) (*listenerConfig, *hcmv3.HttpConnectionManager, error) {
	lc, err := listenerAddress(l)
	if err != nil {
		return nil, nil, err
	}
	if len(l.GetFilterChains()) != 1 {
		return nil, nil, errors.New("exactly one filter chain is implemented on a listener without TLS")
	}
	hcm, err := compileChainHCM(lc, l.GetFilterChains()[0], re)
	if err != nil {
		return nil, nil, err
	}
	return lc, hcm, nil
}

// listenerAddress is a listenerConfig with the listener's name and TCP
// socket address.
func listenerAddress(l *listenerv3.Listener) (*listenerConfig, error) {
	sa := l.GetAddress().GetSocketAddress()
	if sa == nil || sa.GetProtocol() != corev3.SocketAddress_TCP {
		return nil, errors.New("address must be a TCP socket address")
	}
	return &listenerConfig{name: l.GetName(), address: sa.GetAddress(), port: sa.GetPortValue()}, nil
}

// compileChainHCM compiles a filter chain's one network filter, the HTTP
// connection manager, and its HTTP filters into lc.
func compileChainHCM(lc *listenerConfig, fc *listenerv3.FilterChain, re regexEngine) (*hcmv3.HttpConnectionManager, error) {
	if len(fc.GetFilters()) != 1 {
		return nil, errors.New("exactly one network filter per filter chain is implemented")
	}
	f := fc.GetFilters()[0]
	if f.GetName() != networkFilterHCM {
		return nil, fmt.Errorf("network filter %q not implemented", f.GetName())
	}
	var hcm hcmv3.HttpConnectionManager
	if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		return nil, fmt.Errorf("%s: %w", networkFilterHCM, err)
	}
	switch hcm.GetCodecType() {
	case hcmv3.HttpConnectionManager_AUTO, hcmv3.HttpConnectionManager_HTTP1, hcmv3.HttpConnectionManager_HTTP2:
	default:
		return nil, fmt.Errorf("codec_type %v not implemented", hcm.GetCodecType())
	}
	lc.stripPort = hcm.GetStripAnyHostPort()
	lc.normalizePath = hcm.GetNormalizePath().GetValue()
	// upgrade_configs: the connection manager accepts an HTTP/1.1 upgrade
	// of a listed type (matched case-insensitively, as Envoy does) unless
	// enabled is false; the upgrade goes through the default filter chain
	// (no filters of its own). Only websocket is implemented.
	lc.upgrades = map[string]bool{}
	for i, uc := range hcm.GetUpgradeConfigs() {
		if len(uc.GetFilters()) > 0 {
			return nil, fmt.Errorf("upgrade_configs[%d].filters not implemented", i)
		}
		typ := strings.ToLower(uc.GetUpgradeType())
		if typ != "websocket" {
			return nil, fmt.Errorf("upgrade_configs[%d]: upgrade_type %q not implemented", i, uc.GetUpgradeType())
		}
		if _, dup := lc.upgrades[typ]; dup {
			return nil, fmt.Errorf("upgrade_configs[%d]: duplicate upgrade %s", i, uc.GetUpgradeType())
		}
		lc.upgrades[typ] = uc.Enabled == nil || uc.GetEnabled().GetValue()
	}
	if err := compileEarlyMutations(lc, hcm.GetEarlyHeaderMutationExtensions()); err != nil {
		return nil, err
	}
	hfs := hcm.GetHttpFilters()
	names := map[string]bool{}
	if len(hfs) == 0 || hfs[len(hfs)-1].GetName() != filterRouter {
		return nil, errors.New("the last HTTP filter must be " + filterRouter)
	}
	for i, hf := range hfs {
		msg, err := hf.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("http_filters[%d] %s: %w", i, hf.GetName(), err)
		}
		switch c := msg.(type) {
		case *routerv3.Router:
			if i != len(hfs)-1 {
				return nil, errors.New("router must be the last HTTP filter")
			}
		case *corsv3.Cors:
			lc.filters = append(lc.filters, httpFilter{name: hf.GetName(), kind: filterCORS, disabled: hf.GetDisabled()})
		case *extprocv3.ExternalProcessor:
			if _, _, err := extproc.Effective(c, hf.GetDisabled(), nil); err != nil {
				return nil, fmt.Errorf("http_filters[%d] %s: %w", i, hf.GetName(), err)
			}
			lc.filters = append(lc.filters, httpFilter{name: hf.GetName(), kind: filterExtProc, disabled: hf.GetDisabled(), extProc: c})
		case *extauthzv3.ExtAuthz:
			cfg, err := compileExtAuthz(c, re)
			if err != nil {
				return nil, fmt.Errorf("http_filters[%d] %s: %w", i, hf.GetName(), err)
			}
			if !extAuthzFilterName(hf.GetName()) {
				return nil, fmt.Errorf("http_filters[%d]: name %q: an ext_authz filter is named %s or %s/<suffix> here (per-route configuration is keyed by name)",
					i, hf.GetName(), filterExtAuthz, filterExtAuthz)
			}
			if slices.ContainsFunc(lc.filters, func(f httpFilter) bool { return f.name == hf.GetName() }) {
				return nil, fmt.Errorf("http_filters[%d]: a second filter named %q", i, hf.GetName())
			}
			lc.filters = append(lc.filters, httpFilter{name: hf.GetName(), kind: filterExtAuthz, disabled: hf.GetDisabled(), extAuthz: cfg})
			continue
		default:
			return nil, fmt.Errorf("http_filters[%d] %s: %T not implemented", i, hf.GetName(), msg)
		}
		// Per-filter configuration is keyed by the filter's name. Several
		// ext_proc filters may be configured, each under its own name;
		// CORS and the router only under their canonical names.
		if _, isExtProc := msg.(*extprocv3.ExternalProcessor); !isExtProc && hf.GetName() != filterNameOf(msg) {
			return nil, fmt.Errorf("http_filters[%d]: name %q does not match its config %T (per-route configuration is keyed by name)", i, hf.GetName(), msg)
		}
		if names[hf.GetName()] {
			return nil, fmt.Errorf("http_filters[%d]: name %q used twice", i, hf.GetName())
		}
		names[hf.GetName()] = true
	}
	return &hcm, nil
}

func filterNameOf(msg any) string {
	switch msg.(type) {
	case *routerv3.Router:
		return filterRouter
	case *corsv3.Cors:
		return filterCORS
	case *extprocv3.ExternalProcessor:
		return filterExtProc
	}
	return ""
}

// compileEarlyMutations compiles early_header_mutation_extensions: only
// envoy.http.early_header_mutation.header_mutation (HeaderMutation) with
// header removals is implemented (source/extensions/http/
// early_header_mutation/header_mutation: each mutation applied to the
// request headers in order, before route selection).
func compileEarlyMutations(lc *listenerConfig, exts []*corev3.TypedExtensionConfig) error {
	for i, e := range exts {
		msg, err := e.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return fmt.Errorf("early_header_mutation_extensions[%d] %s: %w", i, e.GetName(), err)
		}
		hm, ok := msg.(*earlyhmv3.HeaderMutation)
		if !ok {
			return fmt.Errorf("early_header_mutation_extensions[%d] %s: %T not implemented", i, e.GetName(), msg)
		}
		for j, m := range hm.GetMutations() {
			name := m.GetRemove()
			if name == "" {
				return fmt.Errorf("early_header_mutation_extensions[%d] mutations[%d]: only remove is implemented", i, j)
			}
			lc.earlyRemove = append(lc.earlyRemove, strings.ToLower(name))
		}
	}
	return nil
}
