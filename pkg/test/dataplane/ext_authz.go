// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// The ext_authz HTTP filter, after Envoy's
// source/extensions/filters/http/ext_authz/ext_authz.cc (Filter,
// FilterConfig) and source/extensions/filters/common/ext_authz/
// (check_request_utils.cc: the CheckRequest; ext_authz_grpc_impl.cc and
// ext_authz_http_impl.cc: the two clients and how their answers become
// OK, Denied or Error). ext_authz_check.go holds the check itself.

// filterExtAuthz is the ext_authz filter's extension name. A listener may
// hold several, each named filterExtAuthz or filterExtAuthz + "/" +
// suffix; per-route configuration is keyed by that name.
const filterExtAuthz = "envoy.filters.http.ext_authz"

func extAuthzFilterName(name string) bool {
	return name == filterExtAuthz || (strings.HasPrefix(name, filterExtAuthz+"/") && len(name) > len(filterExtAuthz)+1)
}

// Envoy's defaults (ext_authz config.cc, FilterConfig).
const (
	// extAuthzDefaultTimeout is a gRPC check's timeout when grpc_service
	// sets none (DefaultTimeout in config.cc).
	extAuthzDefaultTimeout = 200 * time.Millisecond
	// maxAuthzResponseBody bounds what the stand-in reads of an HTTP
	// authorization server's answer (Envoy's async client buffers it
	// whole; a larger one is an error here: stricter).
	maxAuthzResponseBody = 1 << 20
)

// extAuthzConfig is a compiled ExtAuthz filter configuration.
type extAuthzConfig struct {
	grpc       bool
	cluster    string
	authority  string // gRPC: envoy_grpc.authority ("" is the cluster name)
	timeout    time.Duration
	pathPrefix string // HTTP
	// allowed selects the request headers put in the CheckRequest (nil:
	// every header); for HTTP it always includes Envoy's four defaults.
	allowed []*stringMatcher
	// upstream selects the HTTP authorization response headers set on the
	// request when allowed (allowed_upstream_headers; none: no header).
	upstream []*stringMatcher
	// body: with_request_body.
	body *extAuthzBody
	// failureModeAllow lets a request through when the check fails.
	failureModeAllow bool
	// statusOnError is the answer to a failed check (default 403).
	statusOnError int
	// rules is decoder_header_mutation_rules, nil when unset.
	rules *extAuthzMutationRules
}

type extAuthzBody struct {
	max          int
	allowPartial bool
	packAsBytes  bool
}

// extAuthzMutationRules is the part of HeaderMutationRules implemented:
// its defaults, and disallow_system (source/extensions/filters/common/
// mutation_rules/mutation_rules.cc, Checker).
type extAuthzMutationRules struct {
	disallowSystem bool
}

// compileExtAuthz checks an ExtAuthz configuration (the fields in
// allowed.go) and compiles it; a value Envoy refuses or the stand-in does
// not implement is an error (NACK).
func compileExtAuthz(c *extauthzv3.ExtAuthz, re regexEngine) (*extAuthzConfig, error) {
	if c.GetTransportApiVersion() != corev3.ApiVersion_V3 {
		// Envoy refuses every other transport version
		// (Config::Utility::checkTransportVersion in config.cc).
		return nil, fmt.Errorf("transport_api_version %v: only V3 is accepted", c.GetTransportApiVersion())
	}
	cfg := &extAuthzConfig{failureModeAllow: c.GetFailureModeAllow(), statusOnError: http.StatusForbidden}
	if s := c.GetStatusOnError(); s != nil {
		// FilterConfig::toErrorCode: a code that is not a known HTTP
		// status falls back to 403.
		if code := int(s.GetCode()); http.StatusText(code) != "" {
			cfg.statusOnError = code
		}
	}
	switch svc := c.GetServices().(type) {
	case *extauthzv3.ExtAuthz_GrpcService:
		gs := svc.GrpcService
		cfg.grpc, cfg.cluster, cfg.authority = true, gs.GetEnvoyGrpc().GetClusterName(), gs.GetEnvoyGrpc().GetAuthority()
		if cfg.cluster == "" {
			return nil, errors.New("grpc_service: only envoy_grpc with a cluster_name is implemented")
		}
		cfg.timeout = extAuthzDefaultTimeout
		if t := gs.GetTimeout(); t != nil {
			cfg.timeout = t.AsDuration()
		}
		if l := c.GetAllowedHeaders(); l != nil {
			// An allow list replaces "every header"
			// (CheckRequestUtils::toRequestMatchers, add_http_headers false).
			cfg.allowed = []*stringMatcher{}
			for i, p := range l.GetPatterns() {
				m, err := compileStringMatcher(p, re)
				if err != nil {
					return nil, fmt.Errorf("allowed_headers[%d]: %w", i, err)
				}
				cfg.allowed = append(cfg.allowed, m)
			}
		}
	case *extauthzv3.ExtAuthz_HttpService:
		hs := svc.HttpService
		if c.GetAllowedHeaders() != nil {
			return nil, errors.New("allowed_headers with http_service not implemented (use http_service.authorization_request.allowed_headers)")
		}
		cfg.cluster = hs.GetServerUri().GetCluster()
		if cfg.cluster == "" {
			return nil, errors.New("http_service.server_uri: a cluster is required")
		}
		if hs.GetServerUri().GetTimeout() == nil {
			return nil, errors.New("http_service.server_uri.timeout is required")
		}
		cfg.timeout = hs.GetServerUri().GetTimeout().AsDuration()
		cfg.pathPrefix = hs.GetPathPrefix()
		// Envoy always sends these four (toRequestMatchers with
		// add_http_headers), plus what the list names.
		for _, h := range []string{"authorization", ":method", ":path", ":authority"} {
			cfg.allowed = append(cfg.allowed, &stringMatcher{kind: "exact", value: h})
		}
		//lint:ignore SA1019 Envoy still reads the deprecated http_service.authorization_request.allowed_headers, and pilot sets it
		for i, p := range hs.GetAuthorizationRequest().GetAllowedHeaders().GetPatterns() {
			m, err := compileStringMatcher(p, re)
			if err != nil {
				return nil, fmt.Errorf("http_service.authorization_request.allowed_headers[%d]: %w", i, err)
			}
			cfg.allowed = append(cfg.allowed, m)
		}
		for i, p := range hs.GetAuthorizationResponse().GetAllowedUpstreamHeaders().GetPatterns() {
			m, err := compileStringMatcher(p, re)
			if err != nil {
				return nil, fmt.Errorf("http_service.authorization_response.allowed_upstream_headers[%d]: %w", i, err)
			}
			cfg.upstream = append(cfg.upstream, m)
		}
	default:
		return nil, errors.New("one of grpc_service and http_service is required")
	}
	if cfg.timeout <= 0 {
		return nil, errors.New("a call timeout of 0 is not implemented")
	}
	if b := c.GetWithRequestBody(); b != nil {
		if b.GetMaxRequestBytes() == 0 {
			return nil, errors.New("with_request_body.max_request_bytes 0 not implemented")
		}
		cfg.body = &extAuthzBody{max: int(b.GetMaxRequestBytes()), allowPartial: b.GetAllowPartialMessage(),
			// FilterConfig: the HTTP service always packs as bytes.
			packAsBytes: b.GetPackAsBytes() || !cfg.grpc}
	}
	if r := c.GetDecoderHeaderMutationRules(); r != nil {
		cfg.rules = &extAuthzMutationRules{disallowSystem: r.GetDisallowSystem().GetValue()}
	}
	return cfg, nil
}

// extAuthzRouteConfig is the per-route ExtAuthzPerRoute: disabled, or
// check_settings (only empty ones are implemented: they enable a filter
// disabled in the connection manager and change nothing else).
func checkExtAuthzPerRoute(c *extauthzv3.ExtAuthzPerRoute) error {
	switch o := c.GetOverride().(type) {
	case *extauthzv3.ExtAuthzPerRoute_Disabled:
		return nil
	case *extauthzv3.ExtAuthzPerRoute_CheckSettings:
		cs := o.CheckSettings
		if len(cs.GetContextExtensions()) > 0 || cs.GetDisableRequestBodyBuffering() || cs.GetWithRequestBody() != nil ||
			cs.GetServiceOverride() != nil || cs.GetEmitClientSpan() != nil {
			return errors.New("check_settings other than empty not implemented")
		}
		return nil
	}
	return errors.New("ExtAuthzPerRoute needs disabled or check_settings")
}

// decodeExtAuthz is the ext_authz filter's decode side for one request
// (Filter::decodeHeaders, decodeData, initiateCall, onComplete):
//
//   - a route whose per-route config says disabled skips the check
//     (getPerRouteFlags: skip_check_);
//   - with with_request_body and a request body (not an upgrade), the body
//     is buffered first: up to max_request_bytes, a longer one answered
//     413 without a check unless allow_partial_message, which sends its
//     first max_request_bytes (decodeHeaders setDecoderBufferLimit,
//     isBufferFull; the connection manager's 413 "Payload Too Large");
//   - the check (extAuthzCheck, ext_authz_check.go) answers OK, Denied or
//     Error: OK applies its header mutations and the request goes on to
//     the next filter with the whole body; Denied is a local reply with
//     the server's status, headers and body; Error lets the request
//     through with failure_mode_allow, else is a local reply of
//     status_on_error with no body; an answer the stand-in cannot apply
//     as Envoy would is a 500 (rejectResponse's code; stricter).
//
// Local replies go through the encoder side of the filters after this one
// (filterChain.localReply), as every local reply does in Envoy.
func (c *filterChain) decodeExtAuthz(ctx context.Context, i int, req *extproc.Request, md map[string]*structpb.Struct) (*extproc.Response, map[string]*structpb.Struct, error) {
	f := c.filters[i]
	if per := c.pf.extAuthz[f.name]; per != nil && per.GetDisabled() {
		return c.decode(ctx, i+1, req, md)
	}
	cfg := f.extAuthz
	reply := func(resp *extproc.Response) (*extproc.Response, map[string]*structpb.Struct, error) {
		out, err := c.localReply(ctx, i, resp)
		return extproc.GRPCLocalReply(req, out, -1), nil, err
	}
	var sent []byte
	if cfg.body != nil && req.Upgrade == "" && req.Body != nil && req.Body != http.NoBody {
		buf, tooLarge, err := bufferAuthzBody(req.Body, cfg.body)
		if err != nil {
			// The client's body failed: as a reset, nothing to answer.
			return nil, nil, err
		}
		if tooLarge {
			return reply(localReply(http.StatusRequestEntityTooLarge, "Payload Too Large"))
		}
		sent = buf
		if len(sent) > cfg.body.max {
			sent = sent[:cfg.body.max] // setRequestBody truncates to max_request_bytes
		}
		req = withBody(req, io.MultiReader(bytes.NewReader(buf), req.Body))
	}
	res := c.dp.extAuthzCheck(ctx, c.ac, cfg, req, sent)
	switch res.status {
	case authzOK:
		next, ok := applyAuthzMutations(cfg, req, res)
		if !ok {
			c.dp.log.Error("dataplane: ext_authz answer not applied", "route", c.sel.r.name, "problem", res.problem)
			return reply(localReply(http.StatusInternalServerError, ""))
		}
		return c.decode(ctx, i+1, next, md)
	case authzDenied:
		resp := localReply(res.code, res.body)
		for _, h := range res.headers {
			resp.Headers.Del(h.key)
		}
		for _, h := range res.headers {
			resp.Headers.Add(h.key, h.value)
		}
		return reply(resp)
	case authzInvalid:
		c.dp.log.Error("dataplane: ext_authz answer refused", "route", c.sel.r.name, "problem", res.problem)
		return reply(localReply(http.StatusInternalServerError, ""))
	default: // authzError
		if cfg.failureModeAllow {
			return c.decode(ctx, i+1, req, md)
		}
		c.dp.log.Warn("dataplane: ext_authz check failed", "route", c.sel.r.name, "problem", res.problem)
		return reply(localReply(cfg.statusOnError, ""))
	}
}

// bufferAuthzBody reads the request body as Envoy's filter buffers it:
// the whole body when it fits in max bytes; else tooLarge (without
// allow_partial_message), or at least max bytes (with it). What it read is
// returned either way, for the request to go on with.
func bufferAuthzBody(body io.Reader, b *extAuthzBody) (buf []byte, tooLarge bool, err error) {
	buf, err = io.ReadAll(io.LimitReader(body, int64(b.max)+1))
	if err != nil {
		return nil, false, err
	}
	if len(buf) > b.max && !b.allowPartial {
		return buf, true, nil
	}
	return buf, false, nil
}

// withBody is a copy of req (headers cloned) with body.
func withBody(req *extproc.Request, body io.Reader) *extproc.Request {
	cp := *req
	cp.Headers = req.Headers.Clone()
	cp.Body = body
	return &cp
}
