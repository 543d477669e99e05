// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

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

// TestEmbeddedExperimentalCRDsMatchModule: crds-experimental/ holds, byte
// for byte, the experimental channel's file of every Gateway API kind
// crds/ holds, from the module version in go.mod.
func TestEmbeddedExperimentalCRDsMatchModule(t *testing.T) {
	paths, err := kubeenv.GatewayAPIExperimentalCRDs()
	if err != nil {
		t.Fatalf("finding the module's experimental CRDs: %v", err)
	}
	byName := map[string]string{}
	for _, p := range paths {
		byName[filepath.Base(p)] = p
	}
	std, err := crdFS.ReadDir("crds")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range std {
		if !strings.HasPrefix(e.Name(), "gateway.networking.k8s.io_") {
			continue
		}
		n++
		want, err := os.ReadFile(byName[e.Name()])
		if err != nil {
			t.Errorf("%s: no experimental version in the module: %v", e.Name(), err)
			continue
		}
		got, err := experimentalCRDFS.ReadFile("crds-experimental/" + e.Name())
		if err != nil {
			t.Errorf("the experimental %s is not embedded in crds-experimental/", e.Name())
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("crds-experimental/%s differs from %s; copy it again", e.Name(), byName[e.Name()])
		}
	}
	exp, err := experimentalCRDFS.ReadDir("crds-experimental")
	if err != nil {
		t.Fatal(err)
	}
	if len(exp) != n {
		t.Errorf("crds-experimental/ has %d files, crds/ %d Gateway API ones", len(exp), n)
	}
}

// TestGatewayAPIChannel: a Gateway with listener filters is refused under
// the standard channel, naming the field, and accepted with them under the
// experimental one; an unknown channel is an error.
func TestGatewayAPIChannel(t *testing.T) {
	gw := []byte(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"Gateway","metadata":{"name":"gw","namespace":"ns"},
"spec":{"gatewayClassName":"istio","listeners":[{"name":"http","port":80,"protocol":"HTTP","filters":{"requests":[
{"type":"ExtensionRef","extensionRef":{"group":"infermesh.io","kind":"ExternalProcessor","name":"bbr"}}]}}]}}`)
	std, err := NewChannelValidator(ChannelStandard)
	if err != nil {
		t.Fatal(err)
	}
	if _, problems := std.Decode(gw); len(problems) == 0 || !strings.Contains(fmt.Sprint(problems), "spec.listeners[0].filters") {
		t.Errorf("standard channel: problems %v, want spec.listeners[0].filters refused", problems)
	}
	exp, err := NewChannelValidator(ChannelExperimental)
	if err != nil {
		t.Fatal(err)
	}
	obj, problems := exp.Decode(gw)
	g, ok := obj.(*gatewayv1.Gateway)
	if len(problems) > 0 || !ok || g.Spec.Listeners[0].Filters == nil || len(g.Spec.Listeners[0].Filters.Requests) != 1 {
		t.Errorf("experimental channel: %T %v, problems %v; want the Gateway with its filter", obj, obj, problems)
	}
	// The CRD's CEL rule: filters only on HTTP and HTTPS.
	tcp := bytes.Replace(gw, []byte(`"protocol":"HTTP"`), []byte(`"protocol":"TCP"`), 1)
	if _, problems := exp.Decode(tcp); !strings.Contains(fmt.Sprint(problems), "filters may only be set when protocol is HTTP or HTTPS") {
		t.Errorf("experimental channel, TCP listener with filters: problems %v", problems)
	}
	if _, err := NewChannelValidator("beta"); err == nil {
		t.Error("channel beta accepted")
	}
}
