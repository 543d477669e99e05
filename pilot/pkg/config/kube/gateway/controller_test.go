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
		// default class, class, Gateway, HTTPRoute and GRPCRoute status
		{"defaults (inference off)", func(*features.Features) {}, 5, false},
		// + shadow Services and pool status
		{"inference on", func(f *features.Features) { f.EnableInferenceExtension = true }, 7, true},
		// default class and shadow Services only
		{"status off", func(f *features.Features) { f.EnableInferenceExtension, f.EnableGatewayAPIStatus = true, false }, 2, true},
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
}
