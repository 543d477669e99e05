// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// FilterExtAuthz is the ext_authz HTTP filter's extension name. Each
// distinct ExternalAuth configuration of a Gateway is its own filter,
// named FilterExtAuthz + "/" + a digest of the configuration
// (extAuthzName); that name is also its typed_per_filter_config key.
const FilterExtAuthz = "envoy.filters.http.ext_authz"

// ExtAuthzTimeout bounds one call to an authorization server
// (grpc_service.timeout, http_service.server_uri.timeout), chosen
// knowingly: Envoy's default for gRPC, 200 ms, fails a cold or remote
// authorization server's first calls, and a call that outlives it is
// answered ExtAuthzStatusOnError, never let through. 10 s is Envoy
// Gateway's default for its ext_authz.
const ExtAuthzTimeout = 10 * time.Second

// ExtAuthzStatusOnError is the answer when the authorization server
// cannot be asked or answers with an error (ext_authz status_on_error):
// the Gateway API says an ExternalAuth filter MUST fail closed, and the
// API has no failure mode to change that. 503 rather than Envoy's default
// 403: the request was not judged, so the client learns that the service
// is unavailable (and may retry) instead of that its credentials were
// refused; a denial keeps the authorization server's own status.
const ExtAuthzStatusOnError = typev3.StatusCode_ServiceUnavailable

// extAuthzUsable reports whether ea can be configured: it resolved to a
// Service port, usable over its TLS, in the protocol it asks (gRPC needs
// HTTP/2). A rule with an ExternalAuth that is not usable answers 500.
func extAuthzUsable(ea *model.ExternalAuth) bool {
	if ea == nil || ea.Invalid != "" || ea.Service == nil || ea.Service.Host == "" || ea.Service.Port <= 0 {
		return false
	}
	switch ea.Protocol {
	case gwv1.HTTPRouteExternalAuthGRPCProtocol:
		return ea.Service.HTTP2
	case gwv1.HTTPRouteExternalAuthHTTPProtocol:
		return true
	}
	return false
}

// extAuthzName is ea.Name, or ExtAuthzFilterName(ea) when it is unset.
func extAuthzName(ea *model.ExternalAuth) string {
	if ea.Name != "" {
		return ea.Name
	}
	return ExtAuthzFilterName(ea)
}

// ExtAuthzFilterName is the name of ea's ext_authz filter: FilterExtAuthz,
// "/" and the first 16 hex digits of the SHA-256 of every setting that
// reaches the filter's configuration (ea.Name aside). Equal ExternalAuth
// filters (of one route or of several) share one filter; any change of a
// setting is another filter. ea must be usable (extAuthzUsable) or at
// least have a Service.
func ExtAuthzFilterName(ea *model.ExternalAuth) string {
	var b []byte
	add := func(s string) { b = strconv.AppendQuote(b, s) }
	add(string(ea.Protocol))
	add(ea.Service.Host)
	b = strconv.AppendInt(b, int64(ea.Service.Port), 10)
	b = strconv.AppendBool(b, ea.Service.HTTP2)
	if t := ea.Service.TLS; t != nil {
		// The cluster carries the TLS; the filter only names the cluster,
		// but the URI's scheme follows it.
		b = append(b, 't')
	}
	for _, h := range ea.AllowedRequestHeaders {
		add(h)
	}
	b = append(b, '|')
	for _, h := range ea.AllowedResponseHeaders {
		add(h)
	}
	add(ea.PathPrefix)
	b = strconv.AppendUint(b, uint64(ea.MaxRequestBytes), 10)
	sum := sha256.Sum256(b)
	return FilterExtAuthz + "/" + hex.EncodeToString(sum[:8])
}

// extAuthzCluster is the cluster of ea's authorization server: its Service
// port's, the one a backendRef to that port uses.
func extAuthzCluster(ea *model.ExternalAuth) string {
	return ClusterName(uint32(ea.Service.Port), ea.Service.Host)
}

// gatewayExtAuthz returns the usable ExternalAuth filters of every rule of
// every route that serves some hostname through a listener of gw (the
// routes whose clusters BuildClusters makes), one per name, sorted by
// name: the ext_authz filters of every connection manager of gw.
func gatewayExtAuthz(gw *model.Gateway) []*model.ExternalAuth {
	byName := map[string]*model.ExternalAuth{}
	for _, l := range gw.Listeners {
		for _, r := range l.Routes {
			if !routeHasExtAuthz(r) || len(routeHostnames(l.Hostname, r.Hostnames)) == 0 {
				continue
			}
			for ri := range r.Rules {
				for _, ea := range r.Rules[ri].ExternalAuth {
					if extAuthzUsable(ea) {
						byName[extAuthzName(ea)] = ea
					}
				}
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*model.ExternalAuth, len(names))
	for i, n := range names {
		out[i] = byName[n]
	}
	return out
}

func routeHasExtAuthz(r *model.Route) bool {
	for ri := range r.Rules {
		if len(r.Rules[ri].ExternalAuth) > 0 {
			return true
		}
	}
	return false
}

// sameExtAuthz reports whether a and b configure the same filters.
func sameExtAuthz(a, b []*model.ExternalAuth) bool {
	return slices.EqualFunc(a, b, func(x, y *model.ExternalAuth) bool { return x == y || extAuthzName(x) == extAuthzName(y) })
}

// extAuthzFilter is the HCM filter of one ExternalAuth: envoy.filters.http.
// ext_authz named extAuthzName, disabled (HttpFilter.disabled), so that
// only the routes of the rules that name it run it (extAuthzPerRoute
// enables it). Its configuration:
//
//   - GRPC: grpc_service envoy_grpc to the Service port's cluster,
//     transport_api_version V3; allowed_headers the filter's
//     allowedHeaders (exact matchers) when it lists some, else unset:
//     every request header is sent, as the Gateway API says.
//   - HTTP: http_service with server_uri http(s)://host:port on that
//     cluster; path_prefix the filter's http.path; authorization_request.
//     allowed_headers its allowedHeaders (Envoy always adds Authorization,
//     :method, :path and :authority, and sets Content-Length to the body it
//     sends); authorization_response.allowed_upstream_headers its
//     allowedResponseHeaders, or, when it lists none, a regular expression
//     matching every header name but the excluded ones
//     (extAuthzUpstreamHeaders).
//   - both: the call's timeout ExtAuthzTimeout; failure_mode_allow false
//     and status_on_error ExtAuthzStatusOnError (fail closed);
//     with_request_body max_request_bytes forwardBody.maxSize,
//     allow_partial_message false (a longer body is refused with 413 and
//     never reaches the authorization server or the backend, as the
//     Gateway API's forwardBody asks; its maxSize text speaks of
//     truncating, which the API marks as still to be checked against data
//     planes: refusing is the side that never forwards unchecked bytes);
//     decoder_header_mutation_rules disallow_system: the authorization
//     server may set, append and remove ordinary request headers, never
//     ":"-prefixed ones or Host (nor, by Envoy's default, x-envoy-*):
//     those mutations are ignored, so it cannot change where a request
//     already routed goes.
func extAuthzFilter(ea *model.ExternalAuth) (*hcmv3.HttpFilter, error) {
	cfg := &extauthzv3.ExtAuthz{
		TransportApiVersion:        corev3.ApiVersion_V3,
		StatusOnError:              &typev3.HttpStatus{Code: ExtAuthzStatusOnError},
		DecoderHeaderMutationRules: &mutationrulesv3.HeaderMutationRules{DisallowSystem: wrapperspb.Bool(true)},
	}
	cluster := extAuthzCluster(ea)
	switch ea.Protocol {
	case gwv1.HTTPRouteExternalAuthGRPCProtocol:
		gs := grpcService(cluster)
		gs.Timeout = durationpb.New(ExtAuthzTimeout)
		cfg.Services = &extauthzv3.ExtAuthz_GrpcService{GrpcService: gs}
		if len(ea.AllowedRequestHeaders) > 0 {
			cfg.AllowedHeaders = exactMatchers(ea.AllowedRequestHeaders)
		}
	case gwv1.HTTPRouteExternalAuthHTTPProtocol:
		scheme := "http"
		if ea.Service.TLS != nil {
			scheme = "https"
		}
		hs := &extauthzv3.HttpService{
			ServerUri: &corev3.HttpUri{
				Uri:              fmt.Sprintf("%s://%s:%d", scheme, ea.Service.Host, ea.Service.Port),
				HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: cluster},
				Timeout:          durationpb.New(ExtAuthzTimeout),
			},
			PathPrefix:            ea.PathPrefix,
			AuthorizationResponse: &extauthzv3.AuthorizationResponse{AllowedUpstreamHeaders: extAuthzUpstreamHeaders(ea.AllowedResponseHeaders)},
		}
		if len(ea.AllowedRequestHeaders) > 0 {
			//lint:ignore SA1019 the HTTP service's allowed headers as the test data plane and TestExternalAuthRealServer check them (Envoy adds authorization, :method, :path and :authority to this list); moving to ExtAuthz.allowed_headers is a change of its own
			hs.AuthorizationRequest = &extauthzv3.AuthorizationRequest{AllowedHeaders: exactMatchers(ea.AllowedRequestHeaders)}
		}
		cfg.Services = &extauthzv3.ExtAuthz_HttpService{HttpService: hs}
	default:
		return nil, fmt.Errorf("ExternalAuth protocol %q is not GRPC or HTTP", ea.Protocol)
	}
	if ea.MaxRequestBytes > 0 {
		cfg.WithRequestBody = &extauthzv3.BufferSettings{MaxRequestBytes: ea.MaxRequestBytes}
	}
	a, err := toAny(cfg)
	if err != nil {
		return nil, err
	}
	return &hcmv3.HttpFilter{Name: extAuthzName(ea), Disabled: true, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}}, nil
}

// extAuthzPerRoute is the typed_per_filter_config entry that enables a
// disabled ext_authz filter on a route: ExtAuthzPerRoute with empty
// check_settings (Envoy creates a filter disabled in the HCM for a route
// that has any per-filter config for it, and empty check settings change
// nothing of the filter's configuration).
func extAuthzPerRoute() (*anypb.Any, error) {
	return toAny(&extauthzv3.ExtAuthzPerRoute{Override: &extauthzv3.ExtAuthzPerRoute_CheckSettings{CheckSettings: &extauthzv3.CheckSettings{}}})
}

func exactMatchers(names []string) *matcherv3.ListStringMatcher {
	l := &matcherv3.ListStringMatcher{}
	for _, n := range names {
		l.Patterns = append(l.Patterns, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: n}})
	}
	return l
}

// ExtAuthzNotCopied are the authorization response headers an HTTP
// ExternalAuth filter without allowedResponseHeaders does not copy into
// the request, besides every ":"-prefixed one. The Gateway API asks for
// every header but Host; these others describe the authorization
// response itself (its framing, its body's type and coding) or its
// connection, and set on the request they would corrupt it (a
// content-length of the authorization response's body, a content-type
// replacing the client's).
var ExtAuthzNotCopied = []string{
	"connection", "content-encoding", "content-length", "content-type", "host", "keep-alive",
	"proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
}

// extAuthzUpstreamHeaders is authorization_response.
// allowed_upstream_headers: exact matchers of names, or, with none, one
// RE2 expression (Envoy matches it against the whole lower-case name)
// matching every name but ExtAuthzNotCopied and ":"-prefixed ones
// (Envoy's empty list would copy nothing).
func extAuthzUpstreamHeaders(names []string) *matcherv3.ListStringMatcher {
	if len(names) > 0 {
		return exactMatchers(names)
	}
	return &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{
		MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: complementRegex(ExtAuthzNotCopied, ":")}},
	}}}
}

// complementRegex is an RE2 expression that, matched against a whole
// string, matches every non-empty string that is not one of words and
// does not start with a byte of noStart. RE2 has no negative look-ahead,
// so it walks the trie of words: at each node, a byte that continues no
// word leads anywhere; a byte that continues one leads to that child's
// expression; the node's own prefix matches when it is not a word.
func complementRegex(words []string, noStart string) string {
	type node struct {
		word     bool
		children map[byte]*node
	}
	root := &node{children: map[byte]*node{}}
	for _, w := range words {
		n := root
		for i := 0; i < len(w); i++ {
			c := n.children[w[i]]
			if c == nil {
				c = &node{children: map[byte]*node{}}
				n.children[w[i]] = c
			}
			n = c
		}
		n.word = true
	}
	classByte := func(c byte) string {
		if strings.IndexByte(`\]^-[`, c) >= 0 {
			return `\` + string(c)
		}
		return string(c)
	}
	var expr func(n *node, isRoot bool) string
	expr = func(n *node, isRoot bool) string {
		var keys []byte
		for k := range n.children {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var alts []string
		if !isRoot && !n.word {
			alts = append(alts, "")
		}
		class := ""
		for _, k := range keys {
			class += classByte(k)
		}
		if isRoot {
			for i := 0; i < len(noStart); i++ {
				class += classByte(noStart[i])
			}
		}
		if class == "" {
			alts = append(alts, ".+")
		} else {
			alts = append(alts, "[^"+class+"].*")
		}
		for _, k := range keys {
			alts = append(alts, regexpQuoteByte(k)+expr(n.children[k], false))
		}
		return "(?:" + strings.Join(alts, "|") + ")"
	}
	return expr(root, true)
}

func regexpQuoteByte(c byte) string {
	if strings.IndexByte(`\.+*?()|[]{}^$`, c) >= 0 {
		return `\` + string(c)
	}
	return string(c)
}

// enableExtAuthz adds to perFilter the entry that enables the ext_authz
// filter of each ExternalAuth filter of rule. ok is false when one of them
// is not usable: the rule then answers 500 (the Gateway API: a filter that
// cannot be honoured must not be skipped, and ExternalAuth fails closed).
//
// The rule's ExternalAuth filters as written must each have been resolved:
// a model whose rule.ExternalAuth does not match them (built by hand, or by
// a controller that does not resolve them) answers 500 rather than serve
// the rule unchecked.
func enableExtAuthz(perFilter map[string]*anypb.Any, rule *model.Rule) (ok bool, err error) {
	written := 0
	if rule.HTTP != nil {
		for _, f := range rule.HTTP.Filters {
			if f.Type == gwv1.HTTPRouteFilterExternalAuth {
				written++
			}
		}
	}
	if written != len(rule.ExternalAuth) {
		return false, nil
	}
	if written == 0 {
		return true, nil
	}
	for _, ea := range rule.ExternalAuth {
		if !extAuthzUsable(ea) {
			return false, nil
		}
	}
	on, err := extAuthzPerRoute()
	if err != nil {
		return false, err
	}
	for _, ea := range rule.ExternalAuth {
		perFilter[extAuthzName(ea)] = on
	}
	return true, nil
}
