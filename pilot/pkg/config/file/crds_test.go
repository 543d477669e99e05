// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// The embedded CRDs are byte-identical copies of the CustomResourceDefinition
// manifests of the module versions in go.mod: after a go.mod bump, rerun
// hack/update-crds.sh.
func TestEmbeddedCRDsMatchModules(t *testing.T) {
	paths, err := kubeenv.StandardCRDs()
	if err != nil {
		t.Fatalf("finding the modules' CRDs: %v", err)
	}
	var want []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !onlyCRDs(data) {
			continue // the Gateway API's ValidatingAdmissionPolicy
		}
		name := filepath.Base(p)
		want = append(want, name)
		embedded, err := crdFS.ReadFile("crds/" + name)
		if err != nil {
			t.Errorf("%s is not embedded; run hack/update-crds.sh", name)
			continue
		}
		if !bytes.Equal(embedded, data) {
			t.Errorf("embedded %s differs from %s; run hack/update-crds.sh", name, p)
		}
	}
	entries, err := crdFS.ReadDir("crds")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(want, e.Name()) {
			t.Errorf("embedded %s is not in the modules any more; run hack/update-crds.sh", e.Name())
		}
	}
}

// onlyCRDs reports whether every document of a manifest is a
// CustomResourceDefinition (the rule hack/update-crds.sh applies).
func onlyCRDs(data []byte) bool {
	kinds := 0
	for _, d := range splitDocuments(data) {
		if !bytes.Contains(d.body, []byte("\nkind: CustomResourceDefinition\n")) {
			return false
		}
		kinds++
	}
	return kinds > 0
}

// Every embedded CRD parses and every served version builds its validators
// (structural schema, OpenAPI, CEL), so no kind fails only at first use.
func TestEmbeddedCRDsBuild(t *testing.T) {
	schemas, err := embeddedCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(schemas) < 15 {
		t.Errorf("%d served kinds/versions, want at least 15", len(schemas))
	}
	for gvk, v := range schemas {
		if err := v.build(); err != nil {
			t.Errorf("%s: %v", gvk, err)
		}
	}
}

// TestOwnCRDsMatchChart: the embedded infermesh.io CRDs are the chart's,
// byte for byte, and every chart CRD is embedded.
func TestOwnCRDsMatchChart(t *testing.T) {
	const chart = "../../../../manifests/charts/infermesh/crds"
	entries, err := os.ReadDir(chart)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("the chart has no CRDs")
	}
	for _, e := range entries {
		want, err := os.ReadFile(filepath.Join(chart, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ownCRDFS.ReadFile("owncrds/" + e.Name())
		if err != nil {
			t.Errorf("the chart's %s is not embedded in owncrds/", e.Name())
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("owncrds/%s differs from the chart's; copy it again", e.Name())
		}
	}
	own, err := ownCRDFS.ReadDir("owncrds")
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != len(entries) {
		t.Errorf("owncrds/ has %d files, the chart %d", len(own), len(entries))
	}
}
