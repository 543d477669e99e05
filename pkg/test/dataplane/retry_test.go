// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// flakyBackend fails each request key (?key=) with ?code= for its first
// ?fail= attempts, or, with ?slow=, answers those attempts only after a
// second; then 200. With ?late= it sends 200 at once and its body a second
// later. It counts attempts per key.
type flakyBackend struct {
	mu       sync.Mutex
	attempts map[string]int
}

func (b *flakyBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	b.mu.Lock()
	b.attempts[q.Get("key")]++
	n := b.attempts[q.Get("key")]
	b.mu.Unlock()
	if q.Get("late") != "" {
		// Headers at once, the body a second later.
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		select {
		case <-time.After(time.Second):
			_, _ = io.WriteString(w, "late body")
		case <-r.Context().Done():
		}
		return
	}
	fail, _ := strconv.Atoi(q.Get("fail"))
	if n <= fail {
		if q.Get("slow") != "" {
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done():
				return
			}
		} else {
			code, _ := strconv.Atoi(q.Get("code"))
			w.WriteHeader(code)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

func (b *flakyBackend) count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.attempts[key]
}

// Route retries as Envoy's router makes them (source/common/router/
// retry_state_impl.cc, RetryStateImpl::wouldRetryFromHeaders and
// wouldRetryFromReset; RetryPolicy and the "x-envoy-retry-on" retry
// conditions in the route API reference and router filter documentation):
// retriable-status-codes retries only the listed codes, num_retries
// retries after the first attempt, the last answer is sent as it came;
// per_try_timeout ends one attempt with a local reset (router.cc,
// Filter::onPerTryTimeout), retried under 5xx/gateway-error/reset only,
// else 504 "upstream request timeout"; the per-try timer no longer counts
// once the response has started (UpstreamRequest::onPerTryTimeout ignores
// it then), so a slow body after prompt headers is not cut.
func TestRetryPolicy(t *testing.T) {
	fb := &flakyBackend{attempts: map[string]int{}}
	srv := httptest.NewServer(fb)
	t.Cleanup(srv.Close)
	route := func(path string, rp *routev3.RetryPolicy) *routev3.Route {
		return &routev3.Route{Match: prefix(path), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}, Timeout: durationpb.New(0), RetryPolicy: rp,
		}}}
	}
	fast := &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond)}
	// perTry leaves a loaded machine (-race, other builds) time to connect
	// and answer a prompt attempt, and still ends the backend's one-second
	// slow answers.
	const perTry = 400 * time.Millisecond
	dp := newTestDP(t, Options{})
	load(t, dp, edsCluster(t, "c", false), cla("c", srv.Listener.Addr().String()),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{
			route("/codes-500", &routev3.RetryPolicy{RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{500},
				NumRetries: wrapperspb.UInt32(3), RetryBackOff: fast}),
			route("/per-try-codes", &routev3.RetryPolicy{RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{500},
				NumRetries: wrapperspb.UInt32(2), PerTryTimeout: durationpb.New(perTry), RetryBackOff: fast}),
			route("/per-try-reset", &routev3.RetryPolicy{RetryOn: "reset",
				NumRetries: wrapperspb.UInt32(2), PerTryTimeout: durationpb.New(perTry), RetryBackOff: fast}),
			route("/per-try-only", &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0), PerTryTimeout: durationpb.New(perTry)}),
			// max_stream_duration set: RouteAction.timeout (10 ms) is ignored,
			// per_try_timeout still bounds each attempt (FilterUtility::
			// finalTimeout takes it whatever the route's timeouts).
			{Match: prefix("/per-try-msd"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}, Timeout: durationpb.New(10 * time.Millisecond),
				MaxStreamDuration: &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(10 * time.Second)},
				RetryPolicy: &routev3.RetryPolicy{RetryOn: "reset", NumRetries: wrapperspb.UInt32(1),
					PerTryTimeout: durationpb.New(perTry), RetryBackOff: fast},
			}}},
		}}), seedListener(t))

	for i, tc := range []struct {
		path, query string
		status      int
		attempts    int
	}{
		{"/codes-500", "code=500&fail=2", 200, 3},
		{"/codes-500", "code=500&fail=4", 500, 4},
		{"/codes-500", "code=503&fail=2", 503, 1},   // not a listed code
		{"/per-try-codes", "slow=1&fail=1", 504, 1}, // a timeout is not a status code
		{"/per-try-reset", "slow=1&fail=1", 200, 2},
		{"/per-try-reset", "slow=1&fail=5", 504, 3},
		{"/per-try-only", "slow=1&fail=1", 504, 1},
		{"/per-try-only", "fail=0", 200, 1},
		{"/per-try-only", "late=1", 200, 1},
		{"/per-try-msd", "slow=1&fail=1", 200, 2},
	} {
		key := fmt.Sprint(i)
		resp := get(t, dp, 80, "GET", "x", tc.path+"?key="+key+"&"+tc.query, nil)
		if resp.StatusCode != tc.status || fb.count(key) != tc.attempts {
			t.Errorf("%s?%s: %d after %d attempts %q, want %d after %d", tc.path, tc.query, resp.StatusCode, fb.count(key), bodyOf(resp), tc.status, tc.attempts)
		}
		if tc.status == 504 && !strings.Contains(bodyOf(resp), "upstream request timeout") {
			t.Errorf("%s?%s: body %q, want upstream request timeout", tc.path, tc.query, bodyOf(resp))
		}
		if strings.Contains(tc.query, "late") && bodyOf(resp) != "late body" {
			t.Errorf("%s?%s: body %q, want the late body whole", tc.path, tc.query, bodyOf(resp))
		}
	}
}

// retry_back_off as Envoy validates it: a base_interval above zero
// (RetryPolicy.RetryBackOff's validation rule, duration gt 0), and a
// max_interval not below it (RetryPolicyImpl in
// source/common/router/config_impl.cc: "retry_policy.max_interval must
// greater than or equal to the base_interval").
func TestRetryBackOffValidation(t *testing.T) {
	for _, b := range []*routev3.RetryPolicy_RetryBackOff{
		{BaseInterval: durationpb.New(0)},
		{BaseInterval: durationpb.New(time.Second), MaxInterval: durationpb.New(time.Millisecond)},
	} {
		err := decodeMsg(t, resourcev3.RouteType, rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Match: prefix("/"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"},
				RetryPolicy:      &routev3.RetryPolicy{RetryOn: "5xx", RetryBackOff: b},
			}},
		}}}))
		if err == nil {
			t.Errorf("retry_back_off %v accepted", b)
		}
	}
}

// The wait before each retry is Envoy's JitteredExponentialBackOffStrategy
// (source/common/common/backoff_strategy.cc, nextBackOffMs: a random value
// below the current interval, which starts at base_interval and doubles
// after each retry up to max_interval; RetryStateImpl builds it from
// retry_back_off, source/common/router/retry_state_impl.cc): below base,
// 2 x base, 4 x base, ..., never max_interval or more. Without
// retry_back_off the base is 25 ms and the maximum ten times the base (the
// router filter documentation, configuration/http/http_filters/
// router_filter, "x-envoy-max-retries"; its ranges, [0, (2^N-1) x base),
// are wider than the source's from the second retry on: the source
// decides). num_retries defaults to 1 (RetryPolicy.num_retries).
func TestRetryBackOffIsJitteredExponential(t *testing.T) {
	dp := newTestDP(t, Options{Rand: rand.New(rand.NewPCG(1, 2))})
	p := &retryPolicy{backOffBase: 10 * time.Millisecond, backOffMax: 100 * time.Millisecond}
	for n, bound := range map[int]time.Duration{1: 10, 2: 20, 3: 40, 4: 80, 5: 100, 6: 100, 40: 100} {
		bound *= time.Millisecond
		var longest time.Duration
		for range 500 {
			d := dp.retryBackOff(p, n)
			if d < 0 || d >= bound {
				t.Fatalf("retry %d waited %v, want below %v", n, d, bound)
			}
			longest = max(longest, d)
		}
		// Uniform below the bound: 500 draws all in its lower half would
		// mean a smaller bound.
		if longest < bound/2 {
			t.Errorf("retry %d waited at most %v in 500 draws, want up to %v", n, longest, bound)
		}
	}

	table, err := compileRouteTable(rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{
		Match: prefix("/"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}, RetryPolicy: &routev3.RetryPolicy{RetryOn: "5xx"}}},
	}}}), recompile)
	if err != nil {
		t.Fatal(err)
	}
	if rp := table.star.routes[0].retry; rp.backOffBase != 25*time.Millisecond || rp.backOffMax != 250*time.Millisecond || rp.numRetries != 1 {
		t.Errorf("defaults: base %v, max %v, num_retries %d; want 25ms, 250ms, 1", rp.backOffBase, rp.backOffMax, rp.numRetries)
	}
}
