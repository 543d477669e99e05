// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package model

import (
	"reflect"
	"strings"
	"time"

	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Gateway is one Gateway of our class, ready for translation. Its krt key is
// "namespace/name".
type Gateway struct {
	Namespace, Name string
	// Listeners are the Gateway's usable listeners (accepted, not
	// conflicted), in spec.listeners order.
	Listeners []Listener
	// EPPBodyMode is how request bodies reach the Gateway's Endpoint
	// Pickers, from its GatewayClass's parameters (the ConfigMap key
	// eppRequestBodyMode); "" is EPPBodyModeFullDuplexStreamed.
	EPPBodyMode EPPBodyMode
	// ClassParametersError is set when the GatewayClass's parametersRef
	// does not resolve (the class is Accepted=False/InvalidParameters), or
	// when the Gateway names parameters of its own
	// (spec.infrastructure.parametersRef, none implemented): the
	// translator refuses the Gateway, so its proxies keep their last
	// configuration and a new proxy gets none.
	ClassParametersError string
	// BackendClientCertificate is the Secret (namespace/name, kubernetes.io/tls)
	// of spec.tls.backend.clientCertificateRef: the client certificate the
	// Gateway presents to the Service backends it reaches over TLS (a
	// BackendTLSPolicy's). "" for none.
	BackendClientCertificate string
}

// CompareRoutes is the order of Listener.Routes: by kind, then namespace,
// then name (not the order of "kind/namespace/name" strings, which puts
// namespace "team-a" before "team").
func CompareRoutes(a, b *Route) int {
	if c := strings.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// Equals is reflect.DeepEqual of g and o, except that a route (*Route) that
// is the same pointer in both is not looked into, and a nil Listeners or
// Routes slice equals an empty one. krt calls it when the controller's
// Translator collection recomputes a Gateway: after one route changes,
// every other route is the pointer it was (routes are immutable once
// built), so the comparison costs the changed routes, not the Gateway's
// thousands.
func (g Gateway) Equals(o Gateway) bool {
	if len(g.Listeners) != len(o.Listeners) {
		return false
	}
	for i := range g.Listeners {
		a, b := g.Listeners[i], o.Listeners[i]
		if len(a.Routes) != len(b.Routes) {
			return false
		}
		for j, r := range a.Routes {
			if r != b.Routes[j] && !reflect.DeepEqual(r, b.Routes[j]) {
				return false
			}
		}
		a.Routes, b.Routes = nil, nil
		if !reflect.DeepEqual(a, b) {
			return false
		}
	}
	g.Listeners, o.Listeners = nil, nil
	return reflect.DeepEqual(g, o)
}

// EPPBodyMode selects the ext_proc body modes of a Gateway's pool routes
// (architecture/xds.md, "EPP request body mode").
type EPPBodyMode string

const (
	// EPPBodyModeFullDuplexStreamed (the default): request and response
	// bodies FULL_DUPLEX_STREAMED, as the GIE EPP protocol describes.
	EPPBodyModeFullDuplexStreamed EPPBodyMode = ""
	// EPPBodyModeStreamed: request bodies STREAMED with
	// send_body_without_waiting_for_header_response, response bodies not
	// sent, for EPPs that answer body chunks with plain body responses
	// (lwepp v1.6.0).
	EPPBodyModeStreamed EPPBodyMode = "Streamed"
)

// ResourceName is the krt key: namespace/name.
func (g Gateway) ResourceName() string { return g.Namespace + "/" + g.Name }

// StreamProtocol reports whether listeners of protocol p carry connections
// to a TCP proxy (TLS, TCP) rather than HTTP requests (HTTP, HTTPS).
func StreamProtocol(p gwv1.ProtocolType) bool {
	return p == gwv1.TLSProtocolType || p == gwv1.TCPProtocolType
}

// Stream reports whether the rule is a TLSRoute's or a TCPRoute's.
func (r *Rule) Stream() bool { return r.TLS != nil || r.TCP != nil }

// Listener is one usable Gateway API Listener with the routes attached to it.
type Listener struct {
	// Name is spec.listeners[].name.
	Name string
	// Port is the listener port (1-65535).
	Port uint32
	// Protocol is HTTP, HTTPS, TLS or TCP.
	Protocol gwv1.ProtocolType
	// Hostname is spec.listeners[].hostname, "" for any (ignored for TCP).
	Hostname string
	// TLS is set for HTTPS, and for TLS with tls.mode Terminate: the
	// Secrets of tls.certificateRefs. A TLS listener without it passes TLS
	// through (tls.mode Passthrough).
	TLS *ListenerTLS
	// Routes are the routes attached to this listener, sorted by kind,
	// namespace and name. Rule precedence across routes is the translator's
	// job (Gateway API HTTPRouteRule matching precedence).
	Routes []*Route
	// Filters are the listener's pre-routing filters (Gateway API
	// Listener.filters.requests), in their order: every request the
	// listener accepts goes through each before route selection, which
	// runs once after the last. The controller passes a listener only when
	// it can serve every one of them.
	Filters []ListenerFilter
	// FilterError, when set, says why a filter of the listener does not
	// resolve (its ExternalProcessor is missing, its Service does not
	// resolve): the listener fails closed, every request it accepts is
	// answered 500, and Filters is empty.
	FilterError string
}

// ListenerFilter is one resolved pre-routing filter of a listener. Type
// says which field is set.
type ListenerFilter struct {
	// Type is ExtensionRef (Processor set). ExternalAuth is refused by the
	// controller until it is implemented.
	Type gwv1.ListenerFilterType
	// Processor is the infermesh.io ExternalProcessor an ExtensionRef
	// filter names.
	Processor *ExternalProcessor
}

// ExternalProcessor is a resolved infermesh.io ExternalProcessor: an Envoy
// ext_proc server behind a Service port.
type ExternalProcessor struct {
	// Namespace and Name are the ExternalProcessor's.
	Namespace, Name string
	// Host is the Service FQDN <name>.<namespace>.svc.<clusterDomain> and
	// Port the Service port; the processor's cluster is
	// outbound|Port||Host, always HTTP/2 (gRPC).
	Host string
	Port int32
	// RequestHeaders and ResponseHeaders say whether headers go to the
	// processor; RequestBodyStreamed and ResponseBodyStreamed whether the
	// body streams through it (FULL_DUPLEX_STREAMED, with its trailers).
	RequestHeaders, ResponseHeaders           bool
	RequestBodyStreamed, ResponseBodyStreamed bool
	// FailOpen is failureMode FailOpen: a failed processor lets the
	// request go on unchanged (ext_proc failure_mode_allow).
	FailOpen bool
	// MessageTimeout is spec.messageTimeout; 0 is Envoy's default.
	MessageTimeout time.Duration
	// TLS is client TLS to the Service port (a BackendTLSPolicy's),
	// resolved as for an EPP; nil means plaintext HTTP/2. A processor
	// whose TLS cannot be honoured is never resolved: its listener is
	// refused.
	TLS *UpstreamTLS
}

// ListenerTLS is an HTTPS listener's TLS termination.
type ListenerTLS struct {
	// CertificateRefs are the Secrets (kubernetes.io/tls) in order, as
	// namespace/name.
	CertificateRefs []string
	// ClientValidation, when set, asks clients for a certificate and
	// validates it (the Gateway's spec.tls.frontend for this listener's
	// port).
	ClientValidation *ClientValidation
}

// ClientValidation is the client-certificate validation of an HTTPS
// listener (Gateway API FrontendTLSValidation).
type ClientValidation struct {
	// CACertificates is the PEM bundle of trusted CAs, from the
	// caCertificateRefs that resolved.
	CACertificates []byte
	// AllowInsecureFallback accepts a connection whose client presents no
	// certificate or one that fails validation (mode AllowInsecureFallback);
	// false requires a valid certificate (AllowValidOnly).
	AllowInsecureFallback bool
}

// Route is one HTTPRoute, GRPCRoute, TLSRoute or TCPRoute attached to a
// listener, with its rules' backends resolved.
type Route struct {
	// Kind is HTTPRoute, GRPCRoute, TLSRoute or TCPRoute.
	Kind            string
	Namespace, Name string
	// CreationTimestamp orders otherwise equal matches (oldest first), as
	// the Gateway API's precedence rules require.
	CreationTimestamp time.Time
	// Hostnames is spec.hostnames; empty means the listener's (a TLSRoute's
	// are the SNI names it claims; a TCPRoute has none).
	Hostnames []string
	Rules     []Rule
}

// Rule is one rule of a route: exactly one of HTTP, GRPC, TLS and TCP is
// set (the rule as written, for matches, filters and timeouts), with its
// backendRefs resolved in Backends.
type Rule struct {
	// Index is the rule's position in spec.rules.
	Index int
	HTTP  *gwv1.HTTPRouteRule
	GRPC  *gwv1.GRPCRouteRule
	// TLS and TCP are a TLSRoute's and a TCPRoute's rule: connections,
	// not requests, go to its Backends (a TCP proxy).
	TLS *gwv1.TLSRouteRule
	TCP *gwv1.TCPRouteRule
	// Backends are the rule's backendRefs, in order. A rule without
	// backendRefs has none (the Gateway API then returns 500, unless a
	// filter such as a redirect answers).
	Backends []Backend
	// ExternalAuth are the rule's ExternalAuth filters (HTTPRoute only),
	// resolved, in filter order. Every request the rule matches must be
	// allowed by each of them before it goes on; one that did not resolve
	// (Invalid set) makes the rule answer 500.
	ExternalAuth []*ExternalAuth
	// Mirrors are the Services the rule's RequestMirror filters send to,
	// by cluster name (outbound|<port>||<host>), for their client TLS
	// (ServiceBackend.TLS). A mirror the controller could not resolve is
	// not in the filters the rule carries.
	Mirrors map[string]*ServiceBackend
}

// ExternalAuth is one resolved ExternalAuth filter (the Gateway API's
// HTTPExternalAuthFilter): Envoy's ext_authz towards a Service port.
type ExternalAuth struct {
	// Name is the name of its Envoy ext_authz filter, a digest of every
	// other field (core.ExtAuthzFilterName), which the controller sets
	// once; "" makes the translator compute it.
	Name string
	// Protocol is GRPC (Envoy's ext_authz gRPC protocol) or HTTP.
	Protocol gwv1.HTTPRouteExternalAuthProtocol
	// Service is the authorization server's Service port, nil when the
	// backendRef did not resolve (Invalid says why).
	Service *ServiceBackend
	// Invalid is why the filter cannot be honoured (the route's
	// ResolvedRefs=False message): the rule then answers 500, never
	// forwards unchecked. "" when it resolved.
	Invalid string
	// AllowedRequestHeaders are the client request headers sent to the
	// authorization server, lower-cased, sorted, without duplicates. GRPC:
	// empty sends every header. HTTP: always also Host, Method, Path,
	// Content-Length and Authorization.
	AllowedRequestHeaders []string
	// AllowedResponseHeaders (HTTP) are the authorization response headers
	// copied into the request to the backend, lower-cased and sorted;
	// empty copies every header but those describing the response itself
	// (see core's extAuthzUpstreamHeaders).
	AllowedResponseHeaders []string
	// PathPrefix (HTTP) is put before the request's path in the
	// authorization request.
	PathPrefix string
	// MaxRequestBytes is forwardBody.maxSize: the request body, up to this
	// many bytes, goes to the authorization server; a longer body is
	// refused with 413. 0 sends no body.
	MaxRequestBytes uint32
}

// Backend is one resolved backendRef of a rule. Exactly one of Service and
// Pool is set when the reference resolved; neither when it did not, and then
// Invalid says why: the Gateway API requires that the share of requests sent
// to an invalid backend gets HTTP 500.
type Backend struct {
	// Weight is backendRef.weight (default 1); 0 sends no traffic.
	Weight  int32
	Service *ServiceBackend
	Pool    *PoolBackend
	// Invalid is the message of the route's ResolvedRefs=False condition
	// for this backend, "" when it resolved.
	Invalid string
	// HTTPFilters are the backendRef's own filters (HTTPBackendRef.filters).
	HTTPFilters []gwv1.HTTPRouteFilter
	// GRPCFilters are the backendRef's own filters (GRPCBackendRef.filters).
	GRPCFilters []gwv1.GRPCRouteFilter
}

// ServiceBackend is a resolved backendRef to a Kubernetes Service.
type ServiceBackend struct {
	// Host is <name>.<namespace>.svc.<clusterDomain>.
	Host string
	// Port is backendRef.port (the Service port).
	Port int32
	// HTTP2 is set when the Service port declares an HTTP/2 protocol
	// (ServicePortHTTP2). The port's cluster is shared by every route that
	// sends to it, so its protocol is the port's, never a route's.
	HTTP2 bool
	// TLS is client TLS to the Service port, from the BackendTLSPolicy or
	// DestinationRule that applies to it (Host is the Service host); nil
	// means plaintext. A port whose TLS setting cannot be honoured is never
	// a ServiceBackend: the controller resolves it as an invalid backend
	// (Backend.Invalid, HTTP 500).
	TLS *UpstreamTLS
	// NegotiateHTTP is set when the Service port declares no protocol at
	// all (ServicePortDeclaresProtocol false) and has client TLS (TLS set):
	// the HTTP version is then negotiated per connection by ALPN, offering
	// h2 and http/1.1 (Envoy's HttpProtocolOptions auto_config): HTTP/2
	// when the server picks h2, HTTP/1.1 otherwise. Such a port can carry
	// a GRPCRoute (its gRPC calls fail if the server does not offer h2, as
	// they would in Envoy). Never set together with HTTP2.
	NegotiateHTTP bool
}

// ServicePortDeclaresProtocol reports whether a Service port declares a
// protocol at all: it has an appProtocol (any value), or its name is a
// protocol of Istio's port naming convention, <protocol> or
// <protocol>-<suffix> with protocol one of grpc, grpc-web, http, http2,
// https, http_proxy, tcp, tls, udp, mongo, mysql, redis (case ignored, as
// Istio's protocol.Parse ignores it). A port named "btls", "web" or
// nothing declares none.
func ServicePortDeclaresProtocol(name, appProtocol string) bool {
	if appProtocol != "" {
		return true
	}
	prefix, _, _ := strings.Cut(strings.ToLower(name), "-")
	switch prefix {
	case "grpc", "http", "http2", "https", "http_proxy", "tcp", "tls", "udp", "mongo", "mysql", "redis":
		return true
	}
	return false
}

// ServicePortHTTP2 reports whether a Service port declares HTTP/2: its
// appProtocol is kubernetes.io/h2c (the Gateway API's HTTP/2 without TLS),
// grpc, grpc-web, http2 or h2c; or, without an appProtocol, its name is
// grpc, http2 or starts with "grpc-" or "http2-" (Istio's port naming
// convention). Case is ignored, as Istio ignores it.
func ServicePortHTTP2(name, appProtocol string) bool {
	if appProtocol != "" {
		switch strings.ToLower(appProtocol) {
		case "kubernetes.io/h2c", "grpc", "grpc-web", "http2", "h2c":
			return true
		}
		return false
	}
	n := strings.ToLower(name)
	for _, p := range []string{"grpc", "http2"} {
		if n == p || strings.HasPrefix(n, p+"-") {
			return true
		}
	}
	return false
}

// PoolBackend is a resolved backendRef to a GIE InferencePool
// (inference.networking.k8s.io/v1).
type PoolBackend struct {
	// Namespace and Name are the pool's.
	Namespace, Name string
	// ShadowService is the pool's shadow Service name and Host its FQDN.
	ShadowService string
	Host          string
	// Port is the shadow Service's first port (54321); the route's cluster
	// is outbound|Port||Host. The shadow Service has one port per
	// spec.targetPorts entry.
	Port int32
	// TargetPorts are the pool's spec.targetPorts[].number, in order.
	TargetPorts []int32
	// AppProtocol is the pool's spec.appProtocol, default http;
	// kubernetes.io/h2c means HTTP/2 over cleartext to the model servers.
	// It alone decides the protocol of the pool's cluster (see HTTP2).
	AppProtocol inferencev1.AppProtocol
	// EPP is the pool's Endpoint Picker. The controller resolves a pool
	// backend only when its endpointPickerRef names a usable Service;
	// otherwise the backend is Invalid (BackendNotFound), so nil here only
	// comes from a hand-built model, and the translator answers 500 for it.
	EPP *EPPBackend
}

// HTTP2 reports whether the pool's model servers speak HTTP/2 (appProtocol
// kubernetes.io/h2c, with prior knowledge); otherwise HTTP/1.1 (http, or
// unset, GIE's default). A GRPCRoute can use only a pool for which it is
// true: gRPC needs HTTP/2.
func (p *PoolBackend) HTTP2() bool { return p.AppProtocol == inferencev1.AppProtocolH2C }

// EPPBackend is the pool's Endpoint Picker Service (spec.endpointPickerRef).
type EPPBackend struct {
	// Service is the EPP Service's name; Host is its FQDN
	// <name>.<pool namespace>.svc.<clusterDomain>.
	Service string
	Host    string
	// Port is endpointPickerRef.port.number (0 when unset).
	Port int32
	// AppProtocol is the EPP Service port's appProtocol ("" when the
	// Service or port was not found); http2, grpc and kubernetes.io/h2c
	// mean HTTP/2.
	AppProtocol string
	// FailureMode is endpointPickerRef.failureMode: FailOpen, or FailClose
	// (the default).
	FailureMode inferencev1.EndpointPickerFailureMode
	// TLS is client TLS to the EPP Service port, resolved as for any
	// Service port; nil means plaintext HTTP/2. An EPP whose TLS setting
	// cannot be honoured makes the pool backend invalid (HTTP 500 whatever
	// the FailureMode: FailOpen is for an EPP that does not answer, not a
	// configuration that would send requests to it in plaintext).
	TLS *UpstreamTLS
}
