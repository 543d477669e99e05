// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gie

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/test/epp"
	"github.com/infermesh/infermesh/pkg/test/extauthz"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// The authorization server's pod, Service and ports. Its ports must be
// free on every address of the namespace (it binds them all): the
// simulators hold 8000 on theirs, the EPP relay 9002 on its own.
const (
	authzIP       = "10.244.0.19"
	authzSvc      = "ext-authz"
	authzGRPCPort = 9191
	authzHTTPPort = 8181
	// authzAPIHeader selects the rule of the ExternalAuth route: "grpc"
	// or "http".
	authzAPIHeader = "x-authz-api"
	// authzPath is the HTTP filter's http.path.
	authzPath = "/check"
	// authzMaxBody is both filters' forwardBody.maxSize: the seed's
	// request body (about 120 bytes) is sent to the server whole; a body
	// over it is refused with 413 before any check.
	authzMaxBody = 1024
)

// Headers a client sends beside the server's x-ext-authz: userHeader is
// named by the filters' allowedHeaders, secretHeader is not (so the
// authorization server must never see its value).
const (
	userHeader   = "x-user"
	userValue    = "alice"
	secretHeader = "x-secret"
	secretValue  = "s3cr3t-never-sent-to-authz"
	// overrideHeader is the sample server's third answer header, which the
	// HTTP filter's allowedResponseHeaders leaves out.
	overrideHeader = "x-ext-authz-additional-header-override"
)

// ExternalAuth in front of an InferencePool, against a real authorization
// server (Istio's sample ext_authz, pkg/test/extauthz; hack/extauthz-binary.sh)
// and the full EPP v1.0.0.
//
// World: the harness with the Gateway API's experimental CRDs (the
// ExternalAuth filter is experimental); the server in the test's network
// namespace at 10.244.0.19 (gRPC 9191, HTTP 8181), behind the Service
// ext-authz (port grpc 9191 appProtocol kubernetes.io/h2c, port http 8181)
// and a ready pod; an HTTPRoute "authz" beside the seed's, on the seed's
// host, whose two rules send to the seed's pool: x-authz-api: grpc runs
// ExternalAuth protocol GRPC with allowedHeaders [x-ext-authz, x-user];
// x-authz-api: http runs protocol HTTP with http.path /check,
// allowedHeaders [x-ext-authz, x-user] and allowedResponseHeaders
// [x-ext-authz-check-result]; both forwardBody.maxSize 1024. Request
// shape: the seed's POST /v1/completions.
//
// Proves, for each protocol: an allowed request (x-ext-authz: allow) is
// served 200 by the pod its EPP picked, and that model server received the
// headers the filter names (GRPC: every header the server returns; HTTP:
// x-ext-authz-check-result only, not the server's other two); the server saw
// x-user but never x-secret (allowedHeaders), over HTTP at /check + the
// request's path, and the request's body (forwardBody); a body over
// forwardBody.maxSize is refused with 413 before any check and goes no
// further; a denied request (no x-ext-authz) gets the server's own
// 403 and body, the server logged the denial, and neither the EPP (no
// ext_proc stream for its request id at the recording proxy) nor any model
// server (nothing served, no simulator's last request is it) saw it. With
// the server stopped, both rules answer 503 (fail closed: ExternalAuth has
// no failure mode; core.ExtAuthzStatusOnError) and again nothing reaches
// the EPP or a model server; restarted, allowed requests are served again.
func TestExternalAuthRealServer(t *testing.T) {
	h := newHarness(t, options{EPP: epp.FullEPP, ExperimentalCRDs: true, OtherIPs: []string{authzIP}})
	srv := extauthz.Start(t, extauthz.Config{NetNS: h.netns, IP: authzIP, GRPCPort: authzGRPCPort, HTTPPort: authzHTTPPort})
	h.createAuthzObjects()
	h.createRoute(authzRoute())
	h.waitEndpoints(authzCluster(authzGRPCPort), []string{srv.GRPCAddr()})
	h.waitEndpoints(authzCluster(authzHTTPPort), []string{srv.HTTPAddr()})
	h.waitRouteConfig("the ExternalAuth route's two rules, each enabling its ext_authz filter",
		func(js string) bool {
			return strings.Count(js, `"`+core.FilterExtAuthz+"/") >= 2 && containsAll(js, `"exact":"grpc"`, `"exact":"http"`)
		})
	h.waitPicking(allowedRequest("grpc"))

	for _, api := range []string{"grpc", "http"} {
		t.Run(api, func(t *testing.T) {
			// Allowed: served on the EPP's pick, carrying what the filter names.
			before := srv.Decisions()
			const n = 5
			for range n {
				res := h.send(t.Context(), allowedRequest(api))
				pick := h.landedOnPick(res)
				ip, _, _ := net.SplitHostPort(pick)
				got, ok := h.sims[ip].LastRequest()
				if !ok || got.Header.Get("x-test-request-id") != res.ID {
					t.Fatalf("%v: the model server at %s has no record of it (last %+v)", res, ip, got.Header)
				}
				checkForwarded(t, api, res, got.Header, srv)
			}
			want := extauthz.Decisions{GRPCAllowed: n}
			if api == "http" {
				want = extauthz.Decisions{HTTPAllowed: n}
			}
			if d := srv.Decisions().Sub(before); d != want {
				t.Fatalf("the server's decisions over the allowed requests: %+v, want %+v", d, want)
			}

			// Denied: the server's answer, and nothing behind the filter saw it.
			before = srv.Decisions()
			quiet := h.behindFilter()
			var ids []string
			for range n {
				res := h.mustSend(deniedRequest(api))
				if res.Status != http.StatusForbidden || string(res.Body) != extauthz.DenyBody || res.Pod != "" {
					t.Fatalf("%v: want the server's 403 %q, from no model server", res, extauthz.DenyBody)
				}
				ids = append(ids, res.ID)
			}
			want = extauthz.Decisions{GRPCDenied: n}
			if api == "http" {
				want = extauthz.Decisions{HTTPDenied: n}
			}
			if d := srv.Decisions().Sub(before); d != want {
				t.Fatalf("the server's decisions over the denied requests: %+v, want %+v", d, want)
			}
			quiet.check(t, h, "denied", http.StatusForbidden, ids)

			// A body over forwardBody.maxSize: 413, never checked, nothing
			// behind the filter.
			before = srv.Decisions()
			quiet = h.behindFilter()
			big := completion(strings.Repeat("lorem ipsum ", authzMaxBody/10)).
				with(authzAPIHeader, api).with(extauthz.CheckHeader, extauthz.AllowValue)
			res := h.mustSend(big)
			if res.Status != http.StatusRequestEntityTooLarge || res.Pod != "" {
				t.Fatalf("%v: a %d-byte body over forwardBody.maxSize %d: want 413 from no model server", res, len(big.Body), authzMaxBody)
			}
			if d := srv.Decisions().Sub(before); d.Total() != 0 {
				t.Fatalf("the server was asked about a body over forwardBody.maxSize: %+v", d)
			}
			quiet.check(t, h, "with a body over forwardBody.maxSize", http.StatusRequestEntityTooLarge, []string{res.ID})
		})
	}

	// The server stopped: the configured answer, 503, on both rules, and
	// nothing behind the filter sees the requests.
	srv.Stop()
	before := srv.Decisions()
	quiet := h.behindFilter()
	var ids []string
	for _, api := range []string{"grpc", "http"} {
		for range 3 {
			res := h.mustSend(allowedRequest(api))
			if res.Status != int(core.ExtAuthzStatusOnError) || res.Pod != "" {
				t.Fatalf("%s, authorization server down: %v; want %d (fail closed) from no model server", api, res, core.ExtAuthzStatusOnError)
			}
			ids = append(ids, res.ID)
		}
	}
	if d := srv.Decisions().Sub(before); d.Total() != 0 {
		t.Fatalf("a stopped server logged decisions: %+v", d)
	}
	quiet.check(t, h, "sent while the authorization server was down", int(core.ExtAuthzStatusOnError), ids)

	// Back: allowed requests are served again, on their picks. The test
	// data plane's gRPC channel to the server reconnects with grpc-go's
	// back-off, so its first checks after the restart may still fail
	// (503), where Envoy would open a new connection at once: a bounded
	// wait, then every request must pass.
	srv.Restart(t)
	for _, api := range []string{"grpc", "http"} {
		var last result
		poll.UntilOr(t, waitConfig, "an allowed "+api+" request served after the restart", func() bool {
			last = h.send(t.Context(), allowedRequest(api))
			return last.Status == http.StatusOK
		}, func() string { return last.String() })
		for range 3 {
			h.landedOnPick(h.mustSend(allowedRequest(api)))
		}
	}
}

// allowedRequest is the seed's completion on the rule of api, with the
// header the server allows on and the two extra headers.
func allowedRequest(api string) request {
	return deniedRequest(api).with(extauthz.CheckHeader, extauthz.AllowValue)
}

// deniedRequest is allowedRequest without x-ext-authz.
func deniedRequest(api string) request {
	return completion(seedPrompt).with(authzAPIHeader, api).with(userHeader, userValue).with(secretHeader, secretValue)
}

// checkForwarded checks what the model server received for the allowed
// res (header got) and what the authorization server received for it.
func checkForwarded(t *testing.T, api string, res result, got http.Header, srv *extauthz.Server) {
	t.Helper()
	if v := got.Get(extauthz.ResultHeader); v != extauthz.ResultAllowed {
		t.Fatalf("%v: the model server got %s %q, want %q from the authorization server", res, extauthz.ResultHeader, v, extauthz.ResultAllowed)
	}
	if got.Get(userHeader) != userValue || got.Get(secretHeader) != secretValue {
		t.Fatalf("%v: the client's own headers did not reach the model server unchanged: %v", res, got)
	}
	switch api {
	case "grpc":
		// Every header of an allowed gRPC check is added to the request;
		// x-ext-authz-check-received is the server's rendering of the
		// check it received: the allowed headers only.
		received := got.Get(extauthz.ReceivedHeader)
		if !containsAll(received, userHeader, userValue, extauthz.CheckHeader, seedPrompt) || containsAny(received, secretValue, res.ID) {
			t.Fatalf("%v: the server received %q; want x-user and x-ext-authz (allowedHeaders) and the body (forwardBody), never x-secret's value or x-test-request-id's", res, received)
		}
		if got.Get(overrideHeader) == "" {
			t.Fatalf("%v: the server's %s did not reach the model server: %v", res, overrideHeader, got)
		}
	case "http":
		// allowedResponseHeaders names x-ext-authz-check-result only.
		for _, h := range []string{extauthz.ReceivedHeader, overrideHeader} {
			if v := got.Values(h); len(v) > 0 {
				t.Fatalf("%v: the model server got %s %q, which allowedResponseHeaders leaves out", res, h, v)
			}
		}
		// What the server received, from its own log line of this check.
		line := lastLine(srv.Logs(), "[HTTP][allowed]")
		wantPath := "llm.ssup2.com" + authzPath + "/v1/completions"
		if !containsAll(line, wantPath, "X-User:[alice]", "X-Ext-Authz:[allow]", seedPrompt) || containsAny(line, secretValue, res.ID) {
			t.Fatalf("%v: the server logged %q; want path %s, x-user and x-ext-authz, the body, never x-secret's value or x-test-request-id's", res, line, wantPath)
		}
	}
}

// containsAny reports whether s contains one of subs.
func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// lastLine is the last line of logs containing marker.
func lastLine(logs, marker string) string {
	lines := strings.Split(logs, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], marker) {
			return lines[i]
		}
	}
	return ""
}

// quietState is what lies behind the filter at one moment: the EPP's
// streams (at the recording proxy) and the model servers' counts.
type quietState struct {
	streams int
	served  int
	last    map[string]string // simulator IP -> request id of its last request
}

func (h *harness) behindFilter() quietState {
	q := quietState{streams: len(h.proxy.Records()), served: servedTotal(h), last: map[string]string{}}
	for ip, s := range h.sims {
		if r, ok := s.LastRequest(); ok {
			q.last[ip] = r.Header.Get("x-test-request-id")
		}
	}
	return q
}

// check fails t unless none of the requests ids, all answered status by
// the filter, got past it since q: no EPP stream carried a request (its
// headers, and so its id, or a pick), nothing was served, every
// simulator's last request is the same.
//
// The EPP does see one stream per such answer, carrying its response
// headers only: the filter's local reply goes through the encoder side of
// every filter after it, ext_proc included, as in Envoy (ext_proc.cc
// Filter::encodeHeaders merges the route's config "in case the
// decodeHeaders() is not called when processing local reply", and the
// EPP's processing mode sends response headers). That stream carries the
// answer, never the request.
func (q quietState) check(t *testing.T, h *harness, what string, status int, ids []string) {
	t.Helper()
	for _, id := range ids {
		if rec, ok := h.proxy.Record(id); ok {
			t.Fatalf("request %s (%s) reached the EPP: %+v", id, what, rec)
		}
	}
	recs := h.proxy.Records()
	if got := len(recs) - q.streams; got != len(ids) {
		t.Fatalf("the EPP saw %d new streams for %d requests %s; want one per answer (the answer's response headers)", got, len(ids), what)
	}
	for _, rec := range recs[q.streams:] {
		if len(rec.RequestHeaders) != 0 || rec.RequestID != "" || rec.PickedMetadata != "" || rec.ResponseStatus != strconv.Itoa(status) {
			t.Fatalf("an EPP stream while only requests %s were sent: %+v; want the %d answer's response headers only", what, rec, status)
		}
	}
	if now := servedTotal(h); now != q.served {
		t.Fatalf("model servers served %d requests while only requests %s were sent", now-q.served, what)
	}
	now := h.behindFilter()
	for ip, id := range now.last {
		if id != q.last[ip] {
			t.Fatalf("the model server at %s received request %s (%s)", ip, id, what)
		}
	}
}

// createAuthzObjects creates the authorization server's ready pod at
// authzIP and its Service with a gRPC (HTTP/2) and an HTTP port.
func (h *harness) createAuthzObjects() {
	h.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: authzSvc + "-0", Labels: map[string]string{"app": authzSvc}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "ext-authz", Image: "example.invalid/ext-authz:never-pulled",
			Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: authzGRPCPort}, {Name: "http", ContainerPort: authzHTTPPort}},
		}}},
	}
	h.createReadyPod(pod, authzIP, true)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: authzSvc},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": authzSvc},
			Ports: []corev1.ServicePort{
				{Name: "grpc", Protocol: corev1.ProtocolTCP, Port: authzGRPCPort, TargetPort: intstr.FromInt32(authzGRPCPort), AppProtocol: ptr.To("kubernetes.io/h2c")},
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: authzHTTPPort, TargetPort: intstr.FromInt32(authzHTTPPort)},
			},
		},
	}
	if _, err := h.kube.CoreV1().Services(seed.Namespace).Create(h.t.Context(), svc, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// authzCluster is the data plane cluster of the authorization Service's port.
func authzCluster(port int) string {
	return fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", port, authzSvc, seed.Namespace)
}

// authzRoute is the seed's route renamed "authz", with one rule per
// protocol (matched by x-authz-api), each with its ExternalAuth filter and
// the seed's pool as backend.
func authzRoute() *gwv1.HTTPRoute {
	r := seed.HTTPRoute()
	r.Name = "authz"
	base := r.Spec.Rules[0]
	allowed := []string{extauthz.CheckHeader, userHeader}
	rule := func(api string, f *gwv1.HTTPExternalAuthFilter) gwv1.HTTPRouteRule {
		ru := *base.DeepCopy()
		ru.Matches[0].Headers = []gwv1.HTTPHeaderMatch{{Name: authzAPIHeader, Value: api}}
		ru.Filters = []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterExternalAuth, ExternalAuth: f}}
		return ru
	}
	ref := func(port int) gwv1.BackendObjectReference {
		return gwv1.BackendObjectReference{Name: authzSvc, Port: ptr.To(gwv1.PortNumber(port))}
	}
	r.Spec.Rules = []gwv1.HTTPRouteRule{
		rule("grpc", &gwv1.HTTPExternalAuthFilter{
			ExternalAuthProtocol: gwv1.HTTPRouteExternalAuthGRPCProtocol, BackendRef: ref(authzGRPCPort),
			GRPCAuthConfig: &gwv1.GRPCAuthConfig{AllowedRequestHeaders: allowed},
			ForwardBody:    &gwv1.ForwardBodyConfig{MaxSize: authzMaxBody},
		}),
		rule("http", &gwv1.HTTPExternalAuthFilter{
			ExternalAuthProtocol: gwv1.HTTPRouteExternalAuthHTTPProtocol, BackendRef: ref(authzHTTPPort),
			HTTPAuthConfig: &gwv1.HTTPAuthConfig{Path: authzPath, AllowedRequestHeaders: allowed,
				AllowedResponseHeaders: []string{extauthz.ResultHeader}},
			ForwardBody: &gwv1.ForwardBodyConfig{MaxSize: authzMaxBody},
		}),
	}
	return r
}
