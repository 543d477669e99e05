// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// seenRequest is what a recordingBackend saw of one request.
type seenRequest struct {
	path, host string
	bodyLen    int
}

// recordingBackend reads each request's body whole, reports the request on
// seen and answers 500 to the first ?fail= attempts of each ?key=, then 200.
type recordingBackend struct {
	seen     chan seenRequest
	mu       sync.Mutex
	attempts map[string]int
}

func newRecordingBackend(t *testing.T) (*recordingBackend, *httptest.Server) {
	t.Helper()
	b := &recordingBackend{seen: make(chan seenRequest, 64), attempts: map[string]int{}}
	s := httptest.NewServer(b)
	t.Cleanup(s.Close)
	return b, s
}

func (b *recordingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	b.seen <- seenRequest{path: r.URL.RequestURI(), host: r.Host, bodyLen: int(n)}
	q := r.URL.Query()
	b.mu.Lock()
	b.attempts[q.Get("key")]++
	attempt := b.attempts[q.Get("key")]
	b.mu.Unlock()
	if fail, _ := strconv.Atoi(q.Get("fail")); attempt <= fail {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (b *recordingBackend) count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.attempts[key]
}

// next is the next request the backend saw, within ten seconds.
func (b *recordingBackend) next(t *testing.T) seenRequest {
	t.Helper()
	select {
	case s := <-b.seen:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the backend")
		return seenRequest{}
	}
}

// mirrored is a route to cluster "primary" mirrored to cluster "mirror"
// with runtime_fraction's default_value percent/100 (nil: no
// runtime_fraction, every request).
func mirrored(path string, percent *uint32, rp *routev3.RetryPolicy) *routev3.Route {
	m := &routev3.RouteAction_RequestMirrorPolicy{Cluster: "mirror"}
	if percent != nil {
		m.RuntimeFraction = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: *percent}}
	}
	return &routev3.Route{Match: prefix(path), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "primary"}, RequestMirrorPolicies: []*routev3.RouteAction_RequestMirrorPolicy{m},
		RetryPolicy: rp,
	}}}
}

func post(t *testing.T, dp *DataPlane, host, path string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+dp.Addr(80).String()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Request mirroring as Envoy's router does it (RouteAction.
// RequestMirrorPolicy in the route API reference; ShadowWriterImpl::shadow
// and shadowAppendedHost in source/common/router/shadow_writer_impl.cc):
// the mirror cluster gets a copy of the request, body included, with
// "-shadow" appended to the Host before its port; its answer is dropped;
// runtime_fraction's default_value samples the requests mirrored (0%:
// none).
func TestRequestMirrorPolicy(t *testing.T) {
	for host, want := range map[string]string{
		"echo.example.com":      "echo.example.com-shadow",
		"echo.example.com:8080": "echo.example.com-shadow:8080",
		"[2001:db8::1]:8080":    "[2001:db8::1]-shadow:8080", // getPortStart, not a re-joined host
		"[2001:db8::1]":         "[2001:db8::1]-shadow",
	} {
		if got := shadowHost(host); got != want {
			t.Errorf("shadowHost(%q) = %q, want %q", host, got, want)
		}
	}

	primary, ps := newRecordingBackend(t)
	mirror, ms := newRecordingBackend(t)
	zero, all := uint32(0), uint32(100)
	dp := newTestDP(t, Options{})
	load(t, dp, edsCluster(t, "primary", false), cla("primary", ps.Listener.Addr().String()),
		edsCluster(t, "mirror", false), cla("mirror", ms.Listener.Addr().String()),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{
			mirrored("/never", &zero, nil), mirrored("/always", &all, nil), mirrored("/unsampled", nil, nil),
		}}), seedListener(t))

	// The 0% request goes first: a mirror of it would reach the mirror
	// backend before the next request's.
	if code := post(t, dp, "echo.example.com:8080", "/never", []byte("abc")); code != 200 {
		t.Fatalf("/never: %d", code)
	}
	for _, path := range []string{"/always", "/unsampled"} {
		if code := post(t, dp, "echo.example.com:8080", path, []byte("abc")); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		want := seenRequest{path: path, host: "echo.example.com-shadow:8080", bodyLen: 3}
		if got := mirror.next(t); got != want {
			t.Errorf("mirror saw %+v, want %+v", got, want)
		}
	}
	for range 3 {
		if got := primary.next(t); got.host != "echo.example.com:8080" || got.bodyLen != 3 {
			t.Errorf("primary saw %+v, want the request as sent", got)
		}
	}
}

// A request body larger than the router's buffer limit (the listener's
// per_connection_buffer_limit_bytes, 1 MiB by default) makes Envoy's
// router give up retries for that request and stream the body to the one
// attempt (Router::Filter::decodeData in source/common/router/router.cc:
// "Give up on the retry/shadow", stat retry_or_shadow_abandoned). A body at
// the limit is still buffered. Mirrors are not given up: since Envoy 1.33
// they stream alongside the request (envoy.reloadable_features.
// streaming_shadow, on by default), whatever the body's size.
func TestRetriesAbandonedAboveBufferLimit(t *testing.T) {
	primary, ps := newRecordingBackend(t)
	mirror, ms := newRecordingBackend(t)
	dp := newTestDP(t, Options{})
	retry := &routev3.RetryPolicy{RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{500}, NumRetries: wrapperspb.UInt32(1),
		RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond)}}
	plain := &routev3.Route{Match: prefix("/plain"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "primary"}, RetryPolicy: retry}}}
	load(t, dp, edsCluster(t, "primary", false), cla("primary", ps.Listener.Addr().String()),
		edsCluster(t, "mirror", false), cla("mirror", ms.Listener.Addr().String()),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{plain, mirrored("/", nil, retry)}}), seedListener(t))

	over, at := make([]byte, retryShadowBufferLimit+1), make([]byte, retryShadowBufferLimit)
	for _, path := range []string{"/plain", "/mirrored"} {
		if code := post(t, dp, "x", path+"?key=over"+path[1:]+"&fail=1", over); code != 500 || primary.count("over"+path[1:]) != 1 {
			t.Errorf("%s, body over the limit: %d after %d attempts, want the first attempt's 500 (no retry)", path, code, primary.count("over"+path[1:]))
		}
		if got := primary.next(t); got.bodyLen != len(over) {
			t.Errorf("%s: the attempt over the limit got %d bytes, want all %d", path, got.bodyLen, len(over))
		}
		if code := post(t, dp, "x", path+"?key=at"+path[1:]+"&fail=1", at); code != 200 || primary.count("at"+path[1:]) != 2 {
			t.Errorf("%s, body at the limit: %d after %d attempts, want 200 after a retry", path, code, primary.count("at"+path[1:]))
		}
		for range 2 {
			if got := primary.next(t); got.bodyLen != len(at) {
				t.Errorf("%s: an attempt at the limit got %d bytes, want all %d", path, got.bodyLen, len(at))
			}
		}
	}
	// Mirrors are fire-and-forget: the two may reach the mirror in either
	// order, so each is matched by its key, not by arrival.
	want := map[string]int{"/mirrored?key=overmirrored&fail=1": len(over), "/mirrored?key=atmirrored&fail=1": len(at)}
	for range len(want) {
		got := mirror.next(t)
		n, ok := want[got.path]
		if !ok {
			t.Errorf("mirror saw %s (%d bytes), want only the two /mirrored requests, each once", got.path, got.bodyLen)
			continue
		}
		delete(want, got.path)
		if got.bodyLen != n {
			t.Errorf("mirror saw %s with %d bytes, want %d (mirrors stream whatever the size)", got.path, got.bodyLen, n)
		}
	}
}
