// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestStandardCRDsAreTheModulesManifests(t *testing.T) {
	paths, err := StandardCRDs()
	if err != nil {
		t.Fatal(err)
	}
	var names, skipped []string
	for _, p := range paths {
		crds, skip, err := readCRDs(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range crds {
			names = append(names, c.GetName())
		}
		skipped = append(skipped, skip...)
	}
	for _, want := range []string{
		"gatewayclasses.gateway.networking.k8s.io",
		"gateways.gateway.networking.k8s.io",
		"httproutes.gateway.networking.k8s.io",
		"grpcroutes.gateway.networking.k8s.io",
		"referencegrants.gateway.networking.k8s.io",
		"backendtlspolicies.gateway.networking.k8s.io",
		"inferencepools.inference.networking.k8s.io",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("StandardCRDs lacks %s; has %v", want, names)
		}
	}
	for _, n := range names {
		if n == "inferencepoolimports.inference.networking.x-k8s.io" {
			t.Errorf("StandardCRDs holds the experimental %s", n)
		}
	}
	t.Logf("%d CRDs in %d files; skipped %v", len(names), len(paths), skipped)
}

// TestGatewayAPIExperimentalCRDs: the experimental channel's manifests, every
// one annotated with that channel (the Gateway API suite refuses a cluster
// whose CRDs mix channels), and HTTPRoute's retry field, which only the
// experimental channel has.
func TestGatewayAPIExperimentalCRDs(t *testing.T) {
	paths, err := GatewayAPIExperimentalCRDs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		crds, _, err := readCRDs(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range crds {
			names = append(names, c.GetName())
			if ch := c.GetAnnotations()["gateway.networking.k8s.io/channel"]; ch != "experimental" {
				t.Errorf("%s in %s: channel annotation %q, want experimental", c.GetName(), p, ch)
			}
			if c.GetName() == "httproutes.gateway.networking.k8s.io" && !strings.Contains(fmt.Sprint(c.Object), "retry:") {
				t.Errorf("%s in %s has no retry field", c.GetName(), p)
			}
		}
	}
	for _, want := range []string{"gateways.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io",
		"grpcroutes.gateway.networking.k8s.io", "listenersets.gateway.networking.k8s.io"} {
		if !slices.Contains(names, want) {
			t.Errorf("GatewayAPIExperimentalCRDs lacks %s; has %v", want, names)
		}
	}
}

// TestGatewayAPICRDsAt: the manifests of a version other than go.mod's
// (the one the GIE suite v1.6.0 is built against) carry that bundle
// version and the channel asked for; a channel that does not exist is an
// error, not an empty list.
func TestGatewayAPICRDsAt(t *testing.T) {
	paths, err := GatewayAPICRDsAt("standard", "v1.6.1")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range paths {
		crds, _, err := readCRDs(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range crds {
			n++
			a := c.GetAnnotations()
			if a["gateway.networking.k8s.io/bundle-version"] != "v1.6.1" || a["gateway.networking.k8s.io/channel"] != "standard" {
				t.Errorf("%s in %s: bundle-version %q channel %q, want v1.6.1 standard", c.GetName(), p,
					a["gateway.networking.k8s.io/bundle-version"], a["gateway.networking.k8s.io/channel"])
			}
		}
	}
	if n == 0 {
		t.Error("no CRD in the v1.6.1 standard channel")
	}
	if _, err := GatewayAPICRDsAt("stable", "v1.6.1"); err == nil {
		t.Error("channel stable: no error")
	}
}
