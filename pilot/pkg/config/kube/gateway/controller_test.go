// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"testing"

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
		// Gateway, ListenerSet, HTTPRoute, GRPCRoute and BackendTLSPolicy
		// status, route problem Events
		{"defaults (inference off)", func(*features.Features) {}, 12, false},
		// + shadow Services and pool status
		{"inference on", func(f *features.Features) { f.EnableInferenceExtension = true }, 14, true},
		// default class, deployments and shadow Services only
		{"status off", func(f *features.Features) { f.EnableInferenceExtension, f.EnableGatewayAPIStatus = true, false }, 6, true},
		// no ServiceAccount, Service, ConfigMap and Deployment writers
		{"deployment off", func(f *features.Features) { f.EnableGatewayDeployment = false }, 8, false},
		{"deployment, plaintext", func(f *features.Features) { f.GatewayXDSPlaintext = true }, 12, false},
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
