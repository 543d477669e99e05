// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// The flags decide which collections and writers exist.
func TestNewControllerFollowsFlags(t *testing.T) {
	stop := krt.WithStop(t.Context().Done())
	leader := func() bool { return true }
	cases := []struct {
		name    string
		mutate  func(*features.Features)
		writers int
		pools   bool
	}{
		// default class, the four Gateway deployment writers, class,
		// Gateway, ListenerSet, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute,
		// BackendTLSPolicy and ExternalProcessor status, route problem
		// Events
		{"defaults (inference off)", func(*features.Features) {}, 15, false},
		// + shadow Services and pool status
		{"inference on", func(f *features.Features) { f.EnableInferenceExtension = true }, 17, true},
		// default class, deployments and shadow Services only
		{"status off", func(f *features.Features) { f.EnableInferenceExtension, f.EnableGatewayAPIStatus = true, false }, 6, true},
		// no ServiceAccount, Service, ConfigMap and Deployment writers
		{"deployment off", func(f *features.Features) { f.EnableGatewayDeployment = false }, 11, false},
		{"deployment, plaintext", func(f *features.Features) { f.GatewayXDSPlaintext = true }, 15, false},
		{"Gateway API off", func(f *features.Features) { f.EnableGatewayAPI = false }, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := features.Defaults()
			tc.mutate(&f)
			c, err := NewController(ControllerConfig{Client: kube.NewFake(kube.OptionalCRDs()...), Features: f, IsLeader: leader,
				Krt: []krt.CollectionOption{stop}})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(c.RunFunctions()); n != tc.writers {
				t.Errorf("%d writers, want %d", n, tc.writers)
			}
			if got := c.PoolStatuses != nil && c.ShadowServices != nil; got != tc.pools {
				t.Errorf("pool collections built = %v, want %v", got, tc.pools)
			}
		})
	}
	if _, err := NewController(ControllerConfig{Features: features.Defaults()}); err == nil {
		t.Error("NewController without a client: no error")
	}
	// Proxy settings that make no valid bootstrap fail at construction.
	for name, mutate := range map[string]func(*features.Features){
		"token over plaintext": func(f *features.Features) { f.GatewayXDSPlaintext, f.GatewayXDSServiceAccountAuth = true, true },
		"missing CA file":      func(f *features.Features) { f.GatewayXDSCAFile = t.TempDir() + "/missing.pem" },
		"token without audience": func(f *features.Features) {
			f.GatewayXDSServiceAccountAuth, f.GatewayXDSTokenAudience = true, ""
		},
		"address without port": func(f *features.Features) { f.GatewayXDSAddress = "pilot-discovery" },
	} {
		f := features.Defaults()
		mutate(&f)
		if _, err := NewController(ControllerConfig{Client: kube.NewFake(kube.OptionalCRDs()...), Features: f, IsLeader: leader,
			Krt: []krt.CollectionOption{stop}}); err == nil {
			t.Errorf("%s: NewController returned no error", name)
		}
	}
}

// TestProxyServiceAccount: a Gateway of ours is served to tokens of the
// ServiceAccount its deployment runs as (<gateway>-<class>), in its
// namespace; a Gateway of another class, or none, to nobody; before the
// Gateways are read the answer says it is not final.
func TestProxyServiceAccount(t *testing.T) {
	ctx := t.Context()
	stop := krt.WithStop(ctx.Done())
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "istio"}, Spec: gwv1.GatewayClassSpec{ControllerName: controller}}
	other := seedGateway()
	other.Name, other.Spec.GatewayClassName = "foreign", "someone-elses"
	client := kube.NewFake(append(kube.OptionalCRDs(), class, seedGateway(), other)...)
	c, err := NewController(ControllerConfig{Client: client, Features: features.Defaults(), IsLeader: func() bool { return true },
		Krt: []krt.CollectionOption{stop}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, synced := c.ProxyServiceAccount("gateway-namespace", "gateway"); ok || synced {
		t.Errorf("before the informers start: ok %v, synced %v; want an answer that is not final", ok, synced)
	}
	client.Start(ctx.Done())
	t.Cleanup(client.Shutdown)
	if !c.Gateways.WaitUntilSynced(ctx.Done()) {
		t.Fatal("Gateways never synced")
	}
	for _, tc := range []struct {
		ns, name, want string
		ok             bool
	}{
		{"gateway-namespace", "gateway", "gateway-istio", true},
		{"gateway-namespace", "foreign", "", false},
		{"gateway-namespace", "missing", "", false},
		{"other-namespace", "gateway", "", false},
	} {
		sa, ok, synced := c.ProxyServiceAccount(tc.ns, tc.name)
		if sa != tc.want || ok != tc.ok || !synced {
			t.Errorf("ProxyServiceAccount(%s, %s) = %q, %v, %v; want %q, %v, true", tc.ns, tc.name, sa, ok, synced, tc.want, tc.ok)
		}
	}
	off := features.Defaults()
	off.EnableGatewayAPI = false
	c, err = NewController(ControllerConfig{Client: kube.NewFake(), Features: off, IsLeader: func() bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	if sa, ok, synced := c.ProxyServiceAccount("gateway-namespace", "gateway"); sa != "" || ok || !synced {
		t.Errorf("Gateway API off: %q, %v, %v; want no Gateway, final", sa, ok, synced)
	}
}
