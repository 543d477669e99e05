// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite golden files from the current output (review the diff by hand)")

// goldenFile is the YAML form of Resources: each list holds protojson
// objects.
type goldenFile struct {
	Listeners []json.RawMessage `json:"listeners"`
	Routes    []json.RawMessage `json:"routes"`
	Clusters  []json.RawMessage `json:"clusters"`
	Endpoints []json.RawMessage `json:"endpoints"`
}

func readGolden(path string) (Resources, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Resources{}, err
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return Resources{}, err
	}
	var g goldenFile
	if err := json.Unmarshal(j, &g); err != nil {
		return Resources{}, err
	}
	var res Resources
	for _, raw := range g.Listeners {
		m := &listenerv3.Listener{}
		if err := protojson.Unmarshal(raw, m); err != nil {
			return Resources{}, fmt.Errorf("listener: %w", err)
		}
		res.Listeners = append(res.Listeners, m)
	}
	for _, raw := range g.Routes {
		m := &routev3.RouteConfiguration{}
		if err := protojson.Unmarshal(raw, m); err != nil {
			return Resources{}, fmt.Errorf("route: %w", err)
		}
		res.Routes = append(res.Routes, m)
	}
	for _, raw := range g.Clusters {
		m := &clusterv3.Cluster{}
		if err := protojson.Unmarshal(raw, m); err != nil {
			return Resources{}, fmt.Errorf("cluster: %w", err)
		}
		res.Clusters = append(res.Clusters, m)
	}
	for _, raw := range g.Endpoints {
		m := &endpointv3.ClusterLoadAssignment{}
		if err := protojson.Unmarshal(raw, m); err != nil {
			return Resources{}, fmt.Errorf("endpoint: %w", err)
		}
		res.Endpoints = append(res.Endpoints, m)
	}
	return res, nil
}

func writeGolden(path string, res Resources) error {
	var g goldenFile
	enc := func(m proto.Message) (json.RawMessage, error) { return protojson.Marshal(m) }
	for _, m := range res.Listeners {
		b, err := enc(m)
		if err != nil {
			return err
		}
		g.Listeners = append(g.Listeners, b)
	}
	for _, m := range res.Routes {
		b, err := enc(m)
		if err != nil {
			return err
		}
		g.Routes = append(g.Routes, b)
	}
	for _, m := range res.Clusters {
		b, err := enc(m)
		if err != nil {
			return err
		}
		g.Clusters = append(g.Clusters, b)
	}
	for _, m := range res.Endpoints {
		b, err := enc(m)
		if err != nil {
			return err
		}
		g.Endpoints = append(g.Endpoints, b)
	}
	j, err := json.Marshal(g)
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return err
	}
	return os.WriteFile(path, y, 0o644)
}

// TestSeedGolden compares the seed scenario's xDS with the hand-written
// testdata/seed.yaml.golden, semantically (protocmp; Any contents are
// compared unpacked). A missing golden fails; -update rewrites it.
func TestSeedGolden(t *testing.T) {
	got := build(t, seedGateway(), seedInputs(), inferenceOn)
	path := filepath.Join("testdata", "seed.yaml.golden")
	if *update {
		if err := writeGolden(path, got); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s: review the diff by hand", path)
	}
	want, err := readGolden(path)
	if err != nil {
		t.Fatalf("golden %s: %v (regenerate with -update, then review by hand)", path, err)
	}
	assertValid(t, want)
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Errorf("seed xDS differs from %s (-want +got):\n%s", path, d)
	}
}
