// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func hv(k, v string, action corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: action}
}

// What Envoy's HeaderParser::configure refuses is refused as invalid, with
// Envoy's message, at route and weighted cluster level, on requests and
// responses: host (any case) and ':'-prefixed names added or removed, and
// a value that is not a substitution format string. A well-formed
// %COMMAND% is refused as not implemented instead.
func TestHeaderParserRefusesAsEnvoy(t *testing.T) {
	const (
		modified = ":-prefixed or host headers may not be modified"
		removed  = ":-prefixed or host headers may not be removed"
	)
	for _, c := range []struct {
		name    string
		route   func(*routev3.Route)
		invalid string // Envoy's reason; "" for not implemented
	}{
		{"request host set", func(r *routev3.Route) {
			r.RequestHeadersToAdd = []*corev3.HeaderValueOption{hv("host", "x", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)}
		}, modified},
		{"response Host add", func(r *routev3.Route) {
			r.ResponseHeadersToAdd = []*corev3.HeaderValueOption{hv("Host", "x", 0)}
		}, modified},
		{"request :authority add", func(r *routev3.Route) {
			r.RequestHeadersToAdd = []*corev3.HeaderValueOption{hv(":authority", "x", 0)}
		}, modified},
		{"request HOST remove", func(r *routev3.Route) { r.RequestHeadersToRemove = []string{"HOST"} }, removed},
		{"response :status remove", func(r *routev3.Route) { r.ResponseHeadersToRemove = []string{":status"} }, removed},
		{"weighted cluster host add", func(r *routev3.Route) {
			r.Action = &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
				Clusters: []*routev3.WeightedCluster_ClusterWeight{{Name: "c", Weight: wrapperspb.UInt32(1),
					RequestHeadersToAdd: []*corev3.HeaderValueOption{hv("host", "x", 0)}}},
			}}}}
		}, modified},
		{"lone percent", func(r *routev3.Route) {
			r.RequestHeadersToAdd = []*corev3.HeaderValueOption{hv("x-discount", "100%", 0)}
		}, "Incorrect configuration: 100%. Couldn't find valid command at position 3"},
		{"percent before text", func(r *routev3.Route) {
			r.ResponseHeadersToAdd = []*corev3.HeaderValueOption{hv("x-off", "50%% and 5% off", 0)}
		}, "Incorrect configuration: 50%% and 5% off. Couldn't find valid command at position 10"},
		{"formatter command", func(r *routev3.Route) {
			r.RequestHeadersToAdd = []*corev3.HeaderValueOption{hv("x-start", "%START_TIME%", 0)}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &routev3.Route{Match: prefix("/"), Action: toCluster("c")}
			c.route(r)
			err := decodeMsg(t, resourcev3.RouteType, rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{r}}))
			var inv *InvalidConfigError
			switch {
			case err == nil:
				t.Fatal("accepted")
			case c.invalid == "":
				if errors.As(err, &inv) || !strings.Contains(err.Error(), "%START_TIME% in \"%START_TIME%\" not implemented") {
					t.Fatalf("got %v, want the command refused as not implemented", err)
				}
			case !errors.As(err, &inv) || inv.Reason != c.invalid:
				t.Fatalf("got %v, want an InvalidConfigError %q", err, c.invalid)
			}
		})
	}
}

// "%%" formats to '%'; an empty value is not added; overwrites are applied
// before appends, and ADD_IF_ABSENT looks at the headers as received (after
// removals), as in Envoy's HeaderParser::evaluateHeaders.
func TestHeaderParserEvaluates(t *testing.T) {
	hm, err := compileHeaderMutation([]*corev3.HeaderValueOption{
		hv("x-test-discount", "100%% off %%%%", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
		hv("x-test-list", "appended", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD),
		hv("x-test-list", "set", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
		hv("x-test-empty", "", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
		hv("x-test-absent", "first", corev3.HeaderValueOption_ADD_IF_ABSENT),
		hv("x-test-absent", "second", corev3.HeaderValueOption_ADD_IF_ABSENT),
		hv("x-test-gone", "back", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS),
	}, []string{"x-test-gone"})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Test-List": {"original"}, "X-Test-Gone": {"x"}}
	hm.apply(h)
	want := http.Header{
		"X-Test-Discount": {"100% off %%"},
		"X-Test-List":     {"set", "appended"},
		"X-Test-Absent":   {"first", "second"},
	}
	if len(h) != len(want) {
		t.Fatalf("headers %v, want %v", h, want)
	}
	for k, v := range want {
		if strings.Join(h[k], "|") != strings.Join(v, "|") {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
}

// ClusterWeight.host_rewrite_literal rewrites its share's Host, and the
// route's host_rewrite_literal, applied after it, wins over it
// (WeightedClusterEntry::finalizeRequestHeaders).
func TestWeightedClusterHostRewrite(t *testing.T) {
	dp := newTestDP(t, Options{Rand: rand.New(rand.NewPCG(1, 2))})
	a := backend(t, "a")
	share := func(routeHost string) *routev3.Route_Route {
		ra := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{{
			Name: "ca", Weight: wrapperspb.UInt32(1),
			HostRewriteSpecifier: &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: "share.internal"},
		}}}}}
		if routeHost != "" {
			ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: routeHost}
		}
		return &routev3.Route_Route{Route: ra}
	}
	load(t, dp, edsCluster(t, "ca", false), cla("ca", a.Listener.Addr().String()),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{
			{Match: prefix("/route"), Action: share("route.internal")},
			{Match: prefix("/"), Action: share("")},
		}}), seedListener(t))
	for path, want := range map[string]string{"/": "share.internal", "/route": "route.internal"} {
		if got := get(t, dp, 80, "GET", "x", path, nil).Header.Get("x-seen-host"); got != want {
			t.Errorf("%s: upstream Host %q, want %q", path, got, want)
		}
	}
}
