// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"time"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// Endpoint and EPPTLS are defined in the model: the service registry
// fills endpoints, the controller TLS.
type (
	Endpoint = model.Endpoint
	EPPTLS   = model.EPPTLS
)

// Inputs are the facts the model does not carry, keyed so that another
// package (the service registry) can fill them without knowing about xDS.
// Client TLS is in the model (ServiceBackend.TLS, EPPBackend.TLS,
// Rule.Mirrors).
type Inputs struct {
	// Endpoints are the ready endpoints per cluster name (ClusterName). A
	// cluster without an entry gets an empty ClusterLoadAssignment.
	Endpoints map[string][]Endpoint
}

// CircuitBreakers are the DEFAULT-priority thresholds put on inference
// (shadow Service) and EPP clusters (Cluster.circuit_breakers.thresholds).
// Envoy's defaults (1,024 each) are too low for a gateway in front of many
// model servers, and hitting max_requests on an EPP cluster under FailOpen
// silently skips the Endpoint Picker.
type CircuitBreakers struct {
	// MaxConnections is thresholds.max_connections.
	MaxConnections uint32
	// MaxPendingRequests is thresholds.max_pending_requests.
	MaxPendingRequests uint32
	// MaxRequests is thresholds.max_requests (concurrent requests; for
	// HTTP/2 upstreams, concurrent streams).
	MaxRequests uint32
}

// DefaultSystemCAFile is Options.SystemCAFile's default.
const DefaultSystemCAFile = "/etc/ssl/certs/ca-certificates.crt"

// DefaultCircuitBreakerLimit is the value every CircuitBreakers threshold
// takes when left zero.
const DefaultCircuitBreakerLimit = 100000

// Options are translator knobs. The zero value is usable: WithDefaults fills
// in every unset field.
type Options struct {
	// InferenceEnabled adds the ext_proc filter to every listener
	// (ENABLE_GATEWAY_API_INFERENCE_EXTENSION). Pool backends without it are
	// an error of the caller, reported by BuildGateway.
	InferenceEnabled bool
	// CircuitBreakers apply to shadow Service and EPP clusters.
	CircuitBreakers CircuitBreakers
	// ConnectTimeout is Cluster.connect_timeout; default 10s.
	ConnectTimeout time.Duration
	// SystemCAFile is the proxy's system trust store, used to verify an
	// upstream whose TLS names no CA and does not skip verification (asked
	// for explicitly: wellKnownCACertificates System, or a DestinationRule
	// naming no CA); default
	// /etc/ssl/certs/ca-certificates.crt (Debian and Ubuntu, the Envoy
	// image's base).
	SystemCAFile string
	// ClusterDomain resolves RequestMirror backendRefs to Service hosts
	// (<name>.<namespace>.svc.<ClusterDomain>); default cluster.local.
	ClusterDomain string

	// eppBodyMode is the Gateway's model.Gateway.EPPBodyMode, set by
	// BuildListeners and BuildRouteConfigurations for their builders.
	eppBodyMode model.EPPBodyMode
	// extAuthz are the Gateway's ext_authz filters (gatewayExtAuthz), set
	// by BuildListeners for buildHCM.
	extAuthz []*model.ExternalAuth
	// gatewayNamespace is the translated Gateway's namespace, where its
	// proxies read a DestinationRule credentialName's CA
	// (model.EPPTLS.CAFor); set by BuildRouteConfigurations and
	// BuildClusters.
	gatewayNamespace string
}

// WithDefaults returns o with every unset field set to its default.
func (o Options) WithDefaults() Options {
	if o.CircuitBreakers.MaxConnections == 0 {
		o.CircuitBreakers.MaxConnections = DefaultCircuitBreakerLimit
	}
	if o.CircuitBreakers.MaxPendingRequests == 0 {
		o.CircuitBreakers.MaxPendingRequests = DefaultCircuitBreakerLimit
	}
	if o.CircuitBreakers.MaxRequests == 0 {
		o.CircuitBreakers.MaxRequests = DefaultCircuitBreakerLimit
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.SystemCAFile == "" {
		o.SystemCAFile = DefaultSystemCAFile
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = "cluster.local"
	}
	return o
}
