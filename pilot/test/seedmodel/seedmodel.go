// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package seedmodel

import (
	"time"

	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// ShadowService is the seed pool's shadow Service name, written out as the
// seed prints it.
const ShadowService = "vllm-llama3-8b-ip-22dc7de1"

// PoolBackend is a resolved InferencePool backend ns/name: shadow Service
// shadow on port 54321 to target port 8000 (appProtocol http), EPP
// "<name>-epp" port 9002 (appProtocol http2) with failure mode mode.
func PoolBackend(ns, name, shadow string, mode inferencev1.EndpointPickerFailureMode) *model.PoolBackend {
	return &model.PoolBackend{
		Namespace: ns, Name: name, ShadowService: shadow,
		Host: shadow + "." + ns + ".svc.cluster.local", Port: 54321,
		TargetPorts: []int32{8000}, AppProtocol: inferencev1.AppProtocolHTTP,
		EPP: &model.EPPBackend{
			Service: name + "-epp", Host: name + "-epp." + ns + ".svc.cluster.local",
			Port: seed.EPPPort, AppProtocol: "http2", FailureMode: mode,
		},
	}
}

// Pool is the seed's pool vllm-llama3-8b as a backend (EPP FailOpen).
func Pool() *model.PoolBackend {
	return PoolBackend(seed.Namespace, seed.PoolName, ShadowService, inferencev1.EndpointPickerFailOpen)
}

// GatewayWith is Gateway ns/name with listener http:80 carrying one
// HTTPRoute routeNS/routeName (hostname host, the seed's rule: PathPrefix /)
// to pool, created 2026-01-01.
func GatewayWith(ns, name, routeNS, routeName, host string, pool *model.PoolBackend) model.Gateway {
	rule := seed.HTTPRoute().Spec.Rules[0]
	return model.Gateway{Namespace: ns, Name: name, Listeners: []model.Listener{{
		Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
		Routes: []*model.Route{{
			Kind: "HTTPRoute", Namespace: routeNS, Name: routeName,
			CreationTimestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			Hostnames:         []string{host},
			Rules:             []model.Rule{{Index: 0, HTTP: &rule, Backends: []model.Backend{{Weight: 1, Pool: pool}}}},
		}},
	}}}
}

// Gateway is the seed: gateway-namespace/gateway, listener http:80,
// HTTPRoute llm-namespace/llm-route (llm.ssup2.com, PathPrefix /) to Pool.
func Gateway() model.Gateway {
	return GatewayWith(seed.GatewayNamespace, seed.GatewayName, seed.Namespace, seed.RouteName, seed.Hostname, Pool())
}

// GatewayEPPTLS is Gateway with the seed EPP reached over client TLS t
// (as the controller resolves a DestinationRule or BackendTLSPolicy on the
// EPP Service; t.Host is set to the EPP host).
func GatewayEPPTLS(t model.EPPTLS) model.Gateway {
	pool := Pool()
	t.Host = pool.EPP.Host
	pool.EPP.TLS = &t
	return GatewayWith(seed.GatewayNamespace, seed.GatewayName, seed.Namespace, seed.RouteName, seed.Hostname, pool)
}
