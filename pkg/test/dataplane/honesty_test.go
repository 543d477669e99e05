// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
)

// seedFragment reads a JSON excerpt as the seed prints it (istioctl output
// with "..." where lines were elided, so brackets may be left open) and
// returns parseable JSON members: elision lines dropped, trailing commas
// removed, open brackets closed. Nothing else is changed.
func seedFragment(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if s := strings.TrimSpace(l); s != "..." && s != "" {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines, "\n")
	var stack []byte
	inStr := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' && (i == 0 || s[i-1] != '\\'):
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			stack = append(stack, c)
		case c == '}' || c == ']':
			stack = stack[:len(stack)-1]
		}
	}
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i] == '{' {
			s += "\n}"
		} else {
			s += "\n]"
		}
	}
	return regexp.MustCompile(`,(\s*[}\]])`).ReplaceAllString(s, "$1")
}

func decodeMsg(t *testing.T, typeURL string, m proto.Message) error {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	_, err = decodeResource(typeURL, a)
	return err
}

// The seed's pool route with its ExtProcPerRoute, as its write-up prints it, is
// accepted as printed, inside a route configuration of its own. The seed
// elides the route's match ("..."), which Envoy requires: without it the
// route is refused; with the match the seed's HTTPRoute has (PathPrefix /,
// i.e. prefix "/") it is accepted.
func TestSeedShell5RouteAccepted(t *testing.T) {
	frag := seedFragment(t, "testdata/seed_shell5_route.json.txt")
	rc := &routev3.RouteConfiguration{}
	fromJSON(t, `{"name": "http.80", "virtualHosts": [{"name": "llm.ssup2.com:80", "domains": ["llm.ssup2.com"], `+frag+`}]}`, rc)
	if err := decodeMsg(t, resourcev3.RouteType, rc); err == nil || !strings.Contains(err.Error(), "Route.Match: value is required") {
		t.Fatalf("elided match: want Envoy's validation error, got %v", err)
	}
	rc.VirtualHosts[0].Routes[0].Match = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	if err := decodeMsg(t, resourcev3.RouteType, rc); err != nil {
		t.Fatalf("seed route rejected: %v", err)
	}
	if got := rc.GetVirtualHosts()[0].GetRoutes()[0].GetTypedPerFilterConfig()[filterExtProc]; got == nil {
		t.Fatal("fragment lost its ext_proc override")
	}
}

// The seed's OverrideHost policy, as its write-up prints it, is accepted on
// an EDS cluster.
// The seed elides the round robin policy's typed_config ("..."); Envoy
// requires one, so the test supplies the RoundRobin message there and
// changes nothing else.
func TestSeedShell8ClusterAccepted(t *testing.T) {
	frag := seedFragment(t, "testdata/seed_shell8_cluster.json.txt")
	c := &clusterv3.Cluster{}
	fromJSON(t, `{"name": "outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local", "type": "EDS",
		"edsClusterConfig": {"edsConfig": {"ads": {}, "resourceApiVersion": "V3"}}, `+frag+`}`, c)
	if err := decodeMsg(t, resourcev3.ClusterType, c); err == nil || !strings.Contains(err.Error(), "round_robin") {
		t.Fatalf("elided typed_config: want an error naming round_robin, got %v", err)
	}
	var oh = c.GetLoadBalancingPolicy().GetPolicies()[0].GetTypedExtensionConfig()
	ohMsg, err := oh.GetTypedConfig().UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	rr, _ := anypb.New(&roundrobinv3.RoundRobin{})
	fb := ohMsg.ProtoReflect().Get(ohMsg.ProtoReflect().Descriptor().Fields().ByName("fallback_policy")).Message().Interface().(*clusterv3.LoadBalancingPolicy)
	fb.GetPolicies()[0].GetTypedExtensionConfig().TypedConfig = rr
	if oh.TypedConfig, err = anypb.New(ohMsg); err != nil {
		t.Fatal(err)
	}
	if err := decodeMsg(t, resourcev3.ClusterType, c); err != nil {
		t.Fatalf("seed cluster rejected: %v", err)
	}
	cc, err := compileCluster(c)
	if err != nil {
		t.Fatal(err)
	}
	if cc.overrideHost == nil || len(cc.overrideHost.sources) != 1 || cc.overrideHost.sources[0].namespace != "envoy.lb" ||
		cc.overrideHost.sources[0].path[0] != "x-gateway-destination-endpoint" {
		t.Fatalf("override host policy = %+v", cc.overrideHost)
	}
}

// Everything pilot/pkg/networking/core builds for the seed is accepted.
func TestCoreSeedAccepted(t *testing.T) {
	gw := seedmodel.GatewayEPPTLS(model.EPPTLS{InsecureSkipVerify: true})
	res, err := core.BuildGateway(&gw, core.Inputs{Endpoints: map[string][]core.Endpoint{}}, core.Options{InferenceEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range res.Listeners {
		n++
		if err := decodeMsg(t, resourcev3.ListenerType, l); err != nil {
			t.Errorf("listener: %v", err)
		}
	}
	for _, r := range res.Routes {
		n++
		if err := decodeMsg(t, resourcev3.RouteType, r); err != nil {
			t.Errorf("route: %v", err)
		}
	}
	for _, c := range res.Clusters {
		n++
		if err := decodeMsg(t, resourcev3.ClusterType, c); err != nil {
			t.Errorf("cluster: %v", err)
		}
	}
	for _, e := range res.Endpoints {
		n++
		if err := decodeMsg(t, resourcev3.EndpointType, e); err != nil {
			t.Errorf("endpoints: %v", err)
		}
	}
	if n < 5 {
		t.Fatalf("only %d resources built", n)
	}
}

// A set field the data plane does not implement is refused, naming the
// field's full proto name, at any depth (here inside a route's action).
func TestUnimplementedFieldNamed(t *testing.T) {
	rc := &routev3.RouteConfiguration{Name: "http.80", VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"},
				RetryPolicy:      &routev3.RetryPolicy{RetryOn: "5xx", HostSelectionRetryMaxAttempts: 3},
			}},
		}},
	}}}
	err := decodeMsg(t, resourcev3.RouteType, rc)
	var u *UnimplementedFieldError
	if !errors.As(err, &u) || u.Field != "envoy.config.route.v3.RetryPolicy.host_selection_retry_max_attempts" {
		t.Fatalf("got %v, want an UnimplementedFieldError for RetryPolicy.host_selection_retry_max_attempts", err)
	}
	// Inside an Any: an HCM option we do not implement.
	l := seedListener(t)
	if err := decodeMsg(t, resourcev3.ListenerType, l); err != nil {
		t.Fatal(err)
	}
	l.FilterChains[0].Filters[0] = withHCMField(t, l.FilterChains[0].Filters[0])
	if err := decodeMsg(t, resourcev3.ListenerType, l); err == nil ||
		!strings.Contains(err.Error(), "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.generate_request_id") {
		t.Fatalf("got %v, want the HCM field named", err)
	}
}
