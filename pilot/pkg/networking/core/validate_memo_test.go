// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"

	overridehostv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestValidateSharedAndNestedAnys: an Any that occurs in several resources
// is reported for each (Validate checks each distinct Any once), and an Any
// packed inside another Any is reached (the walk skips only fields whose
// type can hold no Any).
func TestValidateSharedAndNestedAnys(t *testing.T) {
	good := build(t, seedGateway(), seedInputs(), inferenceOn)
	unknown := &anypb.Any{TypeUrl: "type.googleapis.com/infermesh.test.NoSuchType", Value: []byte{1}}

	t.Run("shared", func(t *testing.T) {
		r := clone(good)
		for _, c := range r.Clusters {
			c.TypedExtensionProtocolOptions = map[string]*anypb.Any{HTTPProtocolOptionsKey: unknown}
		}
		err := Validate(r)
		for _, c := range r.Clusters {
			if err == nil || !strings.Contains(err.Error(), `cluster "`+c.GetName()+`"`) {
				t.Errorf("Validate = %v, want an error naming cluster %s", err, c.GetName())
			}
		}
	})
	t.Run("nested", func(t *testing.T) {
		r := clone(good)
		c := clusterNamed(t, r, seedShadowCluster)
		tec := c.GetLoadBalancingPolicy().GetPolicies()[0].GetTypedExtensionConfig()
		oh := &overridehostv3.OverrideHost{}
		if err := tec.GetTypedConfig().UnmarshalTo(oh); err != nil {
			t.Fatal(err)
		}
		oh.FallbackPolicy.Policies[0].TypedExtensionConfig.TypedConfig = unknown
		a, err := toAny(oh)
		if err != nil {
			t.Fatal(err)
		}
		tec.TypedConfig = a
		if err := Validate(r); err == nil || !strings.Contains(err.Error(), "NoSuchType") {
			t.Errorf("Validate = %v, want an error about the Any inside the override_host policy", err)
		}
	})
}
