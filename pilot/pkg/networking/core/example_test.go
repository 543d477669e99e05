// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core_test

import (
	"fmt"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
)

// ExampleBuildGateway translates the seed: Gateway gateway-namespace/gateway
// with listener http:80, and the HTTPRoute llm-route (llm.ssup2.com,
// PathPrefix /) to the InferencePool vllm-llama3-8b, whose three model
// server pods and whose Endpoint Picker pod the service registry found (the
// endpoints are made up for the example).
func ExampleBuildGateway() {
	gw := seedmodel.Gateway()
	pool := seedmodel.Pool()
	shadow := core.ClusterName(uint32(pool.Port), pool.Host)
	epp := core.ClusterName(uint32(pool.EPP.Port), pool.EPP.Host)
	in := core.Inputs{Endpoints: map[string][]core.Endpoint{
		shadow: {{Address: "10.244.0.11", Port: 8000}, {Address: "10.244.0.12", Port: 8000}, {Address: "10.244.0.13", Port: 8000}},
		epp:    {{Address: "10.244.0.20", Port: 9002}},
	}}
	res, err := core.BuildGateway(&gw, in, core.Options{InferenceEnabled: true})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for _, l := range res.Listeners {
		fmt.Println("listener", l.GetName())
	}
	for _, rc := range res.Routes {
		fmt.Println("route configuration", rc.GetName())
		for _, vh := range rc.GetVirtualHosts() {
			fmt.Printf("  virtual host %s %v\n", vh.GetName(), vh.GetDomains())
			for _, r := range vh.GetRoutes() {
				fmt.Printf("    route %s prefix %q -> %s\n", r.GetName(), r.GetMatch().GetPrefix(), r.GetRoute().GetCluster())
				// The pool's requests go through its Endpoint Picker first:
				// ExtProcPerRoute names the EPP's cluster.
				var perRoute extprocv3.ExtProcPerRoute
				if err := r.GetTypedPerFilterConfig()[core.FilterExtProc].UnmarshalTo(&perRoute); err == nil {
					fmt.Println("      ext_proc to", perRoute.GetOverrides().GetGrpcService().GetEnvoyGrpc().GetClusterName())
				}
			}
		}
	}
	for _, c := range res.Clusters {
		var lb []string
		for _, p := range c.GetLoadBalancingPolicy().GetPolicies() {
			lb = append(lb, p.GetTypedExtensionConfig().GetName())
		}
		fmt.Println("cluster", c.GetName(), c.GetType(), lb)
	}
	for _, cla := range res.Endpoints {
		var addrs []string
		for _, le := range cla.GetEndpoints() {
			for _, e := range le.GetLbEndpoints() {
				sa := e.GetEndpoint().GetAddress().GetSocketAddress()
				addrs = append(addrs, fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()))
			}
		}
		fmt.Printf("endpoints %s [%s]\n", cla.GetClusterName(), strings.Join(addrs, " "))
	}
	// Output:
	// listener 0.0.0.0_80
	// route configuration http.80
	//   virtual host llm.ssup2.com:80 [llm.ssup2.com]
	//     route llm-namespace.llm-route.0 prefix "/" -> outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local
	//       ext_proc to outbound|9002||vllm-llama3-8b-epp.llm-namespace.svc.cluster.local
	// cluster outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local EDS [envoy.load_balancing_policies.override_host]
	// cluster outbound|9002||vllm-llama3-8b-epp.llm-namespace.svc.cluster.local EDS []
	// endpoints outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local [10.244.0.11:8000 10.244.0.12:8000 10.244.0.13:8000]
	// endpoints outbound|9002||vllm-llama3-8b-epp.llm-namespace.svc.cluster.local [10.244.0.20:9002]
}
