// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/anypb"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Seed scenario names, written out (not derived) so the goldens and the
// tests state what Istio printed.
const (
	seedShadowHost    = "vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local"
	seedEPPHost       = "vllm-llama3-8b-epp.llm-namespace.svc.cluster.local"
	seedShadowCluster = "outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local"
	seedEPPCluster    = "outbound|9002||vllm-llama3-8b-epp.llm-namespace.svc.cluster.local"
)

var inferenceOn = Options{InferenceEnabled: true}

// pool is an InferencePool backend in namespace ns with its EPP
// "<name>-epp" on port 9002 and the given failure mode.
func pool(ns, name string, mode inferencev1.EndpointPickerFailureMode) *model.PoolBackend {
	return seedmodel.PoolBackend(ns, name, name+"-ip-00000000", mode)
}

// seedPool is the seed's pool vllm-llama3-8b (EPP FailOpen), its EPP
// reached with the TLS of the seed's DestinationRule (SIMPLE,
// insecureSkipVerify), as the controller resolves it.
func seedPool() *model.PoolBackend {
	p := seedmodel.Pool()
	p.EPP.TLS = &EPPTLS{Host: seedEPPHost, InsecureSkipVerify: true}
	return p
}

func svc(ns, name string, port int32) *model.ServiceBackend {
	return &model.ServiceBackend{Host: name + "." + ns + ".svc.cluster.local", Port: port}
}

// prefixMatch is an HTTPRouteMatch on a path prefix.
func prefixMatch(p string) gwv1.HTTPRouteMatch {
	return gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(p)}}
}

// httpRoute is an HTTPRoute with one rule per given rule.
func httpRoute(ns, name string, hosts []string, rules ...model.Rule) *model.Route {
	for i := range rules {
		rules[i].Index = i
		if rules[i].HTTP == nil && rules[i].GRPC == nil {
			rules[i].HTTP = &gwv1.HTTPRouteRule{}
		}
	}
	return &model.Route{
		Kind: "HTTPRoute", Namespace: ns, Name: name, Hostnames: hosts, Rules: rules,
		CreationTimestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}
}

// gateway is gateway-namespace/gateway with one HTTP listener on port 80
// carrying routes.
func gateway(routes ...*model.Route) *model.Gateway {
	return &model.Gateway{Namespace: seed.GatewayNamespace, Name: seed.GatewayName, Listeners: []model.Listener{{
		Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Routes: routes,
	}}}
}

// seedGateway is the seed scenario: Gateway gateway-namespace/gateway,
// listener http:80; HTTPRoute llm-namespace/llm-route, host llm.ssup2.com,
// PathPrefix / to InferencePool vllm-llama3-8b (FailOpen).
func seedGateway() *model.Gateway {
	r := seed.HTTPRoute()
	return gateway(httpRoute(seed.Namespace, seed.RouteName, []string{seed.Hostname}, model.Rule{
		HTTP:     &r.Spec.Rules[0],
		Backends: []model.Backend{{Weight: 1, Pool: seedPool()}},
	}))
}

// seedInputs: the model servers 10.244.0.13-15:8000 behind the shadow
// Service and the EPP pod 10.244.0.16:9002.
func seedInputs() Inputs {
	return Inputs{
		Endpoints: map[string][]Endpoint{
			seedShadowCluster: {{Address: "10.244.0.15", Port: 8000}, {Address: "10.244.0.13", Port: 8000}, {Address: "10.244.0.14", Port: 8000}},
			seedEPPCluster:    {{Address: "10.244.0.16", Port: 9002}},
		},
	}
}

// seedGatewayEPPTLS is seedGateway with its EPP reached over TLS t.
func seedGatewayEPPTLS(t EPPTLS) *model.Gateway {
	gw := seedGateway()
	t.Host = seedEPPHost
	gw.Listeners[0].Routes[0].Rules[0].Backends[0].Pool.EPP.TLS = &t
	return gw
}

// build runs BuildGateway and fails the test on error. BuildGateway runs
// Validate, and build checks again, so every resource of every test that
// uses it passes ValidateAll (deep) and the consistency checks.
func build(t *testing.T, gw *model.Gateway, in Inputs, opts Options) Resources {
	t.Helper()
	res, err := BuildGateway(gw, in, opts)
	if err != nil {
		t.Fatalf("BuildGateway: %v", err)
	}
	assertValid(t, res)
	return res
}

// assertValid fails the test unless res passes Validate.
func assertValid(t *testing.T, res Resources) {
	t.Helper()
	if err := Validate(res); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

// routesOf returns the routes of virtual host "<host>:<port>" of the route
// configuration named rc.
func routesOf(t *testing.T, res Resources, rc, vh string) []*routev3.Route {
	t.Helper()
	for _, c := range res.Routes {
		if c.Name != rc {
			continue
		}
		for _, v := range c.VirtualHosts {
			if v.Name == vh {
				return v.Routes
			}
		}
	}
	t.Fatalf("no virtual host %q in route configuration %q", vh, rc)
	return nil
}

func clusterNamed(t *testing.T, res Resources, name string) *clusterv3.Cluster {
	t.Helper()
	for _, c := range res.Clusters {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no cluster %q", name)
	return nil
}

// extProcOf unpacks the ext_proc per-route config of a typed_per_filter_config
// map; nil when there is none.
func extProcOf(t *testing.T, tpfc map[string]*anypb.Any) *extprocv3.ExtProcPerRoute {
	t.Helper()
	a := tpfc[FilterExtProc]
	if a == nil {
		return nil
	}
	per := &extprocv3.ExtProcPerRoute{}
	if err := a.UnmarshalTo(per); err != nil {
		t.Fatal(err)
	}
	return per
}

// hcmOf unpacks the HTTP connection manager of a listener's first chain.
func hcmOf(t *testing.T, res Resources, listener string) *hcmv3.HttpConnectionManager {
	t.Helper()
	for _, l := range res.Listeners {
		if l.Name != listener {
			continue
		}
		h := &hcmv3.HttpConnectionManager{}
		if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	t.Fatalf("no listener %q", listener)
	return nil
}

// assertEPPOverride checks an ExtProcPerRoute sends to cluster with the
// EPP protocol's processing mode and the failure mode allowed or not.
func assertEPPOverride(t *testing.T, per *extprocv3.ExtProcPerRoute, cluster string, failOpen bool) {
	t.Helper()
	if per == nil {
		t.Fatalf("no ext_proc override; want one calling %s", cluster)
	}
	o := per.GetOverrides()
	if got := o.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != cluster {
		t.Errorf("ext_proc gRPC cluster = %q, want %q", got, cluster)
	}
	if o.GetFailureModeAllow() == nil || o.GetFailureModeAllow().GetValue() != failOpen {
		t.Errorf("failure_mode_allow = %v, want %v", o.GetFailureModeAllow(), failOpen)
	}
	pm := o.GetProcessingMode()
	if pm.GetRequestHeaderMode() != extprocv3.ProcessingMode_SEND || pm.GetResponseHeaderMode() != extprocv3.ProcessingMode_SEND ||
		pm.GetRequestBodyMode() != extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED || pm.GetResponseBodyMode() != extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED ||
		pm.GetRequestTrailerMode() != extprocv3.ProcessingMode_SEND || pm.GetResponseTrailerMode() != extprocv3.ProcessingMode_SEND {
		t.Errorf("processing mode = %v, want headers SEND, bodies FULL_DUPLEX_STREAMED, trailers SEND", pm)
	}
	if o.GetMetadataOptions() != nil {
		t.Errorf("override sets metadata_options %v; it would replace the base filter's envoy.lb lists", o.GetMetadataOptions())
	}
}
