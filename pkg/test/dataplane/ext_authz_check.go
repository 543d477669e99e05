// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// authzStatus is Envoy's CheckStatus, plus authzInvalid for an answer the
// filter refuses to apply (rejectResponse, 500).
type authzStatus int

const (
	authzOK authzStatus = iota
	authzDenied
	authzError
	authzInvalid
)

type authzHeader struct{ key, value string }

// authzMutation is one OkHttpResponse header (gRPC) or allowed upstream
// header (HTTP) for the request; op is how it applies.
type authzMutation struct {
	key, value string
	op         authzOp
}

type authzOp int

const (
	opSet               authzOp = iota // overwrite, or add when absent
	opAppendIfExists                   // deprecated append true: comma-append to an existing header
	opAddIfAbsentOnly                  // ambiguous across Envoy versions when present (see applyAuthzMutations)
	opVersionDependent                 // default append_action: set or add, by Envoy version, when present
	opOverwriteIfExists                // OVERWRITE_IF_EXISTS
)

// authzResult is a check's outcome.
type authzResult struct {
	status authzStatus
	// OK:
	mutations []authzMutation
	remove    []string
	// Denied: the reply's status, headers and body.
	code    int
	headers []authzHeader
	body    string
	// problem says why (Error, Invalid) for the log.
	problem string
}

var authzStreamID atomic.Uint64

// extAuthzCheck builds the CheckRequest and asks the authorization server
// over gRPC or HTTP.
func (dp *DataPlane) extAuthzCheck(ctx context.Context, ac *activeConfig, cfg *extAuthzConfig, req *extproc.Request, body []byte) authzResult {
	cr := checkRequest(cfg, req, body)
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if cfg.grpc {
		return dp.grpcAuthzCheck(ctx, cfg, cr)
	}
	return dp.httpAuthzCheck(ctx, ac, cfg, cr)
}

// checkRequest is CheckRequestUtils::createHttpCheck: attributes.request
// with time, and http with id (a stream number), method, path (with its
// query), host (:authority), scheme, size (the content-length header, -1
// without one), the headers (lower-case names, repeated ones joined with
// ","; pseudo-headers :authority, :method, :path and :scheme included;
// only those the allow list matches when there is one) and the buffered
// body (body as text, or raw_body with pack_as_bytes: always for the HTTP
// service); empty metadata_context and route_metadata_context. Source and
// destination peers, protocol and TLS session are not sent: the stand-in
// does not know them (a server that needs them fails here, never passes).
func checkRequest(cfg *extAuthzConfig, req *extproc.Request, body []byte) *authv3.CheckRequest {
	all := map[string][]string{
		":authority": {req.Authority}, ":method": {req.Method}, ":path": {req.Path}, ":scheme": {req.Scheme},
	}
	for k, vs := range req.Headers {
		all[strings.ToLower(k)] = append(all[strings.ToLower(k)], vs...)
	}
	headers := map[string]string{}
	for k, vs := range all {
		if cfg.allowed != nil && !anyMatches(cfg.allowed, k) {
			continue
		}
		headers[k] = strings.Join(vs, ",")
	}
	size := int64(-1)
	if n, err := strconv.ParseInt(req.Headers.Get("content-length"), 10, 64); err == nil {
		size = n
	}
	hr := &authv3.AttributeContext_HttpRequest{
		Id:      strconv.FormatUint(authzStreamID.Add(1), 10),
		Method:  req.Method,
		Headers: headers,
		Path:    req.Path,
		Host:    req.Authority,
		Scheme:  req.Scheme,
		Size:    size,
	}
	if body != nil {
		if cfg.body.packAsBytes {
			hr.RawBody = body
		} else {
			hr.Body = string(body)
		}
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request:              &authv3.AttributeContext_Request{Time: timestamppb.Now(), Http: hr},
		MetadataContext:      &corev3.Metadata{},
		RouteMetadataContext: &corev3.Metadata{},
	}}
}

func anyMatches(ms []*stringMatcher, v string) bool {
	for _, m := range ms {
		if m.matches(v) {
			return true
		}
	}
	return false
}

// grpcAuthzCheck is GrpcClientImpl (ext_authz_grpc_impl.cc): an RPC error
// (unreachable cluster, timeout, a non-OK gRPC status) is Error; a
// CheckResponse with status OK is OK with ok_response's mutations; one
// with error_response is Error; any other is Denied with denied_response's
// status (403 when unset), headers and body.
func (dp *DataPlane) grpcAuthzCheck(ctx context.Context, cfg *extAuthzConfig, cr *authv3.CheckRequest) authzResult {
	if hr := cr.GetAttributes().GetRequest().GetHttp(); !utf8.ValidString(hr.GetBody()) {
		// A proto3 string must be UTF-8: the message cannot be sent
		// (stricter than Envoy's C++ runtime, which may send it anyway).
		return authzResult{status: authzError, problem: "request body is not UTF-8 and pack_as_bytes is false"}
	}
	cc, err := dp.dialGRPC(ctx, cfg.cluster, cfg.authority)
	if err != nil {
		return authzResult{status: authzError, problem: err.Error()}
	}
	resp, err := authv3.NewAuthorizationClient(cc).Check(ctx, cr)
	if err != nil {
		return authzResult{status: authzError, problem: "Check: " + err.Error()}
	}
	switch {
	case codes.Code(resp.GetStatus().GetCode()) == codes.OK:
		ok := resp.GetOkResponse()
		if len(ok.GetResponseHeadersToAdd()) > 0 || len(ok.GetQueryParametersToSet()) > 0 || len(ok.GetQueryParametersToRemove()) > 0 {
			return authzResult{status: authzInvalid, problem: "ok_response response_headers_to_add and query parameter mutations are not implemented"}
		}
		res := authzResult{status: authzOK, remove: ok.GetHeadersToRemove()}
		for _, h := range ok.GetHeaders() {
			op, valid := headerOptionOp(h)
			if !valid {
				return authzResult{status: authzInvalid, problem: fmt.Sprintf("header %q: invalid append_action", h.GetHeader().GetKey())}
			}
			res.mutations = append(res.mutations, authzMutation{key: strings.ToLower(h.GetHeader().GetKey()), value: headerOptionValue(h), op: op})
		}
		return res
	case resp.GetErrorResponse() != nil:
		return authzResult{status: authzError, problem: "error_response from the authorization server"}
	default:
		d := resp.GetDeniedResponse()
		res := authzResult{status: authzDenied, code: http.StatusForbidden, body: d.GetBody()}
		if c := int(d.GetStatus().GetCode()); c > 0 {
			res.code = c
		}
		for _, h := range d.GetHeaders() {
			if k := strings.ToLower(h.GetHeader().GetKey()); k != "" && !strings.HasPrefix(k, ":") {
				res.headers = append(res.headers, authzHeader{k, headerOptionValue(h)})
			}
		}
		return res
	}
}

func headerOptionValue(h *corev3.HeaderValueOption) string {
	if v := h.GetHeader().GetValue(); v != "" {
		return v
	}
	return string(h.GetHeader().GetRawValue())
}

// headerOptionOp is how an OkHttpResponse header applies: the deprecated
// append (true: append to an existing header; false: set) wins; else its
// append_action.
func headerOptionOp(h *corev3.HeaderValueOption) (authzOp, bool) {
	//lint:ignore SA1019 Envoy still honours the legacy append flag of an authorization server's header, and it wins over append_action
	if a := h.GetAppend(); a != nil {
		if a.GetValue() {
			return opAppendIfExists, true
		}
		return opSet, true
	}
	switch h.GetAppendAction() {
	case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
		return opVersionDependent, true
	case corev3.HeaderValueOption_ADD_IF_ABSENT:
		return opAddIfAbsentOnly, true
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
		return opSet, true
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		return opOverwriteIfExists, true
	}
	return 0, false
}

// httpAuthzCheck is RawHttpClientImpl (ext_authz_http_impl.cc): a request
// to the cluster with content-length (the body sent, or 0), the
// CheckRequest's headers (already the allowed ones): :method, :authority,
// :path with path_prefix before it, the rest as headers; a connection
// failure or timeout is Error; an answer 200 is OK, setting each allowed
// upstream header on the request and removing the names listed in
// x-envoy-auth-headers-to-remove; a 5xx is Error; any other is Denied with
// the answer's status, every header but pseudo-headers and Host, and its
// body.
func (dp *DataPlane) httpAuthzCheck(ctx context.Context, ac *activeConfig, cfg *extAuthzConfig, cr *authv3.CheckRequest) authzResult {
	c := ac.clusters[cfg.cluster]
	if c == nil {
		return authzResult{status: authzError, problem: fmt.Sprintf("cluster %q does not exist", cfg.cluster)}
	}
	if len(c.addrs) == 0 {
		return authzResult{status: authzError, problem: fmt.Sprintf("cluster %q: %s", cfg.cluster, bodyNoHealthyUpstream)}
	}
	hr := cr.GetAttributes().GetRequest().GetHttp()
	up := &extproc.Request{Headers: http.Header{}}
	keys := make([]string, 0, len(hr.GetHeaders()))
	for k := range hr.GetHeaders() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := hr.GetHeaders()[k]
		switch k {
		case "content-length":
		case ":method":
			up.Method = v
		case ":path":
			up.Path = cfg.pathPrefix + v
		case ":authority":
			up.Authority = v
		default:
			if !strings.HasPrefix(k, ":") {
				up.Headers.Set(k, v)
			}
		}
	}
	if up.Method == "" || up.Path == "" {
		return authzResult{status: authzError, problem: "the authorization request has no :method or :path"}
	}
	body := hr.GetRawBody()
	up.Headers.Set("content-length", strconv.Itoa(len(body)))
	resp, failure := dp.attempt(ctx, c, c.rt.roundRobin(c.addrs), up, strings.NewReader(string(body)))
	if failure != "" {
		return authzResult{status: authzError, problem: "authorization request failed: " + failure}
	}
	defer resp.Body.Close()
	payload, err := io.ReadAll(io.LimitReader(resp.Body, maxAuthzResponseBody+1))
	if err != nil || len(payload) > maxAuthzResponseBody {
		return authzResult{status: authzError, problem: "authorization response body unreadable or over 1 MiB"}
	}
	switch {
	case resp.StatusCode >= 500:
		return authzResult{status: authzError, problem: "authorization server answered " + resp.Status}
	case resp.StatusCode == http.StatusOK:
		res := authzResult{status: authzOK}
		for _, v := range resp.Header.Values("x-envoy-auth-headers-to-remove") {
			for _, n := range strings.Split(v, ",") {
				if n = strings.TrimSpace(n); n != "" {
					res.remove = append(res.remove, strings.ToLower(n))
				}
			}
		}
		for _, k := range sortedHeaderNames(resp.Header) {
			lk := strings.ToLower(k)
			if lk == "x-envoy-auth-headers-to-remove" || !anyMatches(cfg.upstream, lk) {
				continue
			}
			for _, v := range resp.Header.Values(k) {
				res.mutations = append(res.mutations, authzMutation{key: lk, value: v, op: opSet})
			}
		}
		return res
	default:
		res := authzResult{status: authzDenied, code: resp.StatusCode, body: string(payload)}
		for _, k := range sortedHeaderNames(resp.Header) {
			lk := strings.ToLower(k)
			if lk == "host" || lk == "x-envoy-auth-headers-to-remove" {
				continue
			}
			for _, v := range resp.Header.Values(k) {
				res.headers = append(res.headers, authzHeader{lk, v})
			}
		}
		return res
	}
}

func sortedHeaderNames(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// applyAuthzMutations applies an OK answer to a copy of req, as
// Filter::onComplete does, each mutation first checked against the
// decoder_header_mutation_rules (mutationAllowed; a disallowed one is
// ignored, disallow_is_error being unset). ok is false, and the request
// answered 500, where the stand-in cannot tell what the Envoy release
// would do: the append semantics of OkHttpResponse headers changed
// across releases (headers_to_set / headers_to_append, then append
// actions), so a header whose outcome depends on the release (a default
// append_action, ADD_IF_ABSENT or OVERWRITE_IF_EXISTS on a header the
// request has, or lacks; append true on a header it lacks) is refused:
// stricter. Setting a value that is the same either way is applied.
// HTTP answers only set (allowed_upstream_headers: setCopy).
func applyAuthzMutations(cfg *extAuthzConfig, req *extproc.Request, res authzResult) (*extproc.Request, bool) {
	out := *req
	out.Headers = req.Headers.Clone()
	for _, m := range res.mutations {
		if !mutationAllowed(cfg.rules, m.key) {
			continue
		}
		if m.key == "" || strings.HasPrefix(m.key, ":") || m.key == "host" {
			return nil, false // no rules: Envoy would apply it; not implemented
		}
		present := len(out.Headers.Values(m.key)) > 0
		switch op := m.op; {
		case op == opSet:
			// setCopy: a later one of the same name replaces an earlier.
			out.Headers.Set(m.key, m.value)
		case op == opAppendIfExists && present:
			out.Headers.Set(m.key, strings.Join(out.Headers.Values(m.key), ",")+","+m.value)
		case (op == opVersionDependent || op == opAddIfAbsentOnly) && !present:
			out.Headers.Set(m.key, m.value)
		case op == opOverwriteIfExists && present:
			out.Headers.Set(m.key, m.value)
		default:
			return nil, false
		}
	}
	for _, k := range res.remove {
		k = strings.ToLower(k)
		if k == "" || strings.HasPrefix(k, ":") || k == "host" || !mutationAllowed(cfg.rules, k) {
			// Never removable (HeaderUtility::isRemovableHeader), or
			// disallowed by the rules: ignored.
			continue
		}
		out.Headers.Del(k)
	}
	return &out, true
}

// mutationAllowed is HeaderMutationRules' Checker for the rules this data
// plane implements (nil: no rules, everything allowed): a ":"-prefixed
// header or Host is refused with disallow_system, and otherwise the
// routing ones (host, :authority, :scheme, :method: allow_all_routing
// unset) are; x-envoy-* are refused (allow_envoy unset).
func mutationAllowed(r *extAuthzMutationRules, name string) bool {
	if r == nil {
		return true
	}
	system := strings.HasPrefix(name, ":") || name == "host"
	switch {
	case system && r.disallowSystem:
		return false
	case name == "host" || name == ":authority" || name == ":scheme" || name == ":method":
		return false
	case strings.HasPrefix(name, "x-envoy"):
		return false
	}
	return true
}
