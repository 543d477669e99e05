// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

const networkFilterHCM = "envoy.filters.network.http_connection_manager"

// listenerConfig is a compiled Listener: one plain-HTTP filter chain whose
// only network filter is the HTTP connection manager, with routes over RDS
// (LDS) or inline (a static listener of the bootstrap, static.go).
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
	// normalizePath is normalize_path (pathnorm.go).
	normalizePath bool
	// filters are the HTTP filters before the router, in order.
	filters []httpFilter
}

type httpFilter struct {
	name     string
	disabled bool
	extProc  *extprocv3.ExternalProcessor // for ext_proc
}

// compileListener compiles a listener received over LDS: its routes come
// over RDS from ADS.
func compileListener(l *listenerv3.Listener) (*listenerConfig, error) {
	lc, hcm, err := compileHCMListener(l)
	if err != nil {
		return nil, err
	}
	rds := hcm.GetRds()
	if rds == nil || rds.GetConfigSource().GetAds() == nil {
		return nil, errors.New("route_config must come over RDS from ADS")
	}
	if t := rds.GetConfigSource().GetInitialFetchTimeout(); t != nil && t.AsDuration() != 0 {
		// A listener waits for its route configuration without a bound
		// (dataplane.go); a positive timeout would need Envoy's NullConfig
		// routes after it fires (RdsRouteConfigSubscription::onConfigUpdateFailed).
		return nil, errors.New("rds.config_source.initial_fetch_timeout other than 0 not implemented")
	}
	lc.rdsName = rds.GetRouteConfigName()
	return lc, nil
}

// compileHCMListener compiles what every listener shares: the address,
// the one filter chain and its HTTP connection manager with its HTTP
// filters; the caller compiles the HCM's route specifier.
func compileHCMListener(l *listenerv3.Listener) (*listenerConfig, *hcmv3.HttpConnectionManager, error) {
	sa := l.GetAddress().GetSocketAddress()
	if sa == nil || sa.GetProtocol() != corev3.SocketAddress_TCP {
		return nil, nil, errors.New("address must be a TCP socket address")
	}
	lc := &listenerConfig{name: l.GetName(), address: sa.GetAddress(), port: sa.GetPortValue()}
	if len(l.GetFilterChains()) != 1 || len(l.GetFilterChains()[0].GetFilters()) != 1 {
		return nil, nil, errors.New("exactly one filter chain with one network filter is implemented")
	}
	f := l.GetFilterChains()[0].GetFilters()[0]
	if f.GetName() != networkFilterHCM {
		return nil, nil, fmt.Errorf("network filter %q not implemented", f.GetName())
	}
	var hcm hcmv3.HttpConnectionManager
	if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", networkFilterHCM, err)
	}
	switch hcm.GetCodecType() {
	case hcmv3.HttpConnectionManager_AUTO, hcmv3.HttpConnectionManager_HTTP1, hcmv3.HttpConnectionManager_HTTP2:
	default:
		return nil, nil, fmt.Errorf("codec_type %v not implemented", hcm.GetCodecType())
	}
	lc.stripPort = hcm.GetStripAnyHostPort()
	lc.normalizePath = hcm.GetNormalizePath().GetValue()
	hfs := hcm.GetHttpFilters()
	if len(hfs) == 0 || hfs[len(hfs)-1].GetName() != filterRouter {
		return nil, nil, errors.New("the last HTTP filter must be " + filterRouter)
	}
	for i, hf := range hfs {
		msg, err := hf.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return nil, nil, fmt.Errorf("http_filters[%d] %s: %w", i, hf.GetName(), err)
		}
		switch c := msg.(type) {
		case *routerv3.Router:
			if i != len(hfs)-1 {
				return nil, nil, errors.New("router must be the last HTTP filter")
			}
		case *corsv3.Cors:
			lc.filters = append(lc.filters, httpFilter{name: filterCORS, disabled: hf.GetDisabled()})
		case *extprocv3.ExternalProcessor:
			if _, _, err := extproc.Effective(c, hf.GetDisabled(), nil); err != nil {
				return nil, nil, fmt.Errorf("http_filters[%d] %s: %w", i, hf.GetName(), err)
			}
			lc.filters = append(lc.filters, httpFilter{name: filterExtProc, disabled: hf.GetDisabled(), extProc: c})
		default:
			return nil, nil, fmt.Errorf("http_filters[%d] %s: %T not implemented", i, hf.GetName(), msg)
		}
		if hf.GetName() != filterNameOf(msg) {
			return nil, nil, fmt.Errorf("http_filters[%d]: name %q does not match its config %T (per-route configuration is keyed by name)", i, hf.GetName(), msg)
		}
	}
	return lc, &hcm, nil
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
