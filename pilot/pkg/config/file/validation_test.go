// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
)

// notChecked ends a problem the API server would not run a CRD's CEL rules
// after: its field-less "some validation rules were not checked" is said on
// the error that caused it, not counted as a problem of its own.
const notChecked = " (because of this, the CRD's validation rules were not checked: fix it and check again)"

// Each malformed input is one located problem (or a few, in the API server's
// words), and the good documents around it still load.
func TestMalformedInputs(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "pool.yaml", docs(
		goodPool("good"),
		"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n",
		pool("bad", vllmSelector, ports(9)),
		// YAML 1.1: an unquoted n is the boolean false; the schema wants a string.
		pool("bool-label", "    matchLabels:\n      app: n", port8000),
		// matchLabels is required: the API server rejects an empty selector.
		pool("empty-selector", "    {}", port8000),
		// minProperties 1.
		pool("empty-labels", "    matchLabels: {}", port8000),
		goodPool("good-after"),
	))
	// Truncated in the middle of the second document.
	write(t, dir, "truncated.yaml", docs(goodPool("before-cut"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cut\ndata:\n  a: [b,\n"))
	write(t, dir, "unknown-field.yaml", pool("typo", vllmSelector, port8000)+"  targetPort: 1\nextra: true\n")
	s := newSource(t, dir)

	want := []string{
		`pool.yaml: document 2 (Widget w): unknown kind "Widget" of apiVersion "example.com/v1": not a built-in kind, a served version of the Gateway API or InferencePool CRDs, or an Istio DestinationRule`,
		`pool.yaml: document 3 (InferencePool llm-namespace/bad): spec.targetPorts: Too many: 9: must have at most 8 items` + notChecked,
		`pool.yaml: document 4 (InferencePool llm-namespace/bool-label): spec.selector.matchLabels.app: Invalid value: "boolean": spec.selector.matchLabels.app in body must be of type string: "boolean"` + notChecked,
		`pool.yaml: document 5 (InferencePool llm-namespace/empty-selector): spec.selector.matchLabels: Required value` + notChecked,
		`pool.yaml: document 6 (InferencePool llm-namespace/empty-labels): spec.selector.matchLabels: Invalid value: 0: spec.selector.matchLabels in body should have at least 1 properties`,
		`truncated.yaml: document 2: invalid YAML: line 22: did not find expected node content`,
		`unknown-field.yaml: document 1 (InferencePool llm-namespace/typo): extra: unknown field`,
		`unknown-field.yaml: document 1 (InferencePool llm-namespace/typo): spec.targetPort: unknown field`,
	}
	if diff := cmp.Diff(want, lines(problemText(s.Problems()))); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	var got []string
	for _, p := range s.InferencePools().List() {
		got = append(got, p.Namespace+"/"+p.Name)
	}
	wantPools := []string{"llm-namespace/before-cut", "llm-namespace/good", "llm-namespace/good-after"}
	if diff := cmp.Diff(wantPools, got); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if !s.InferencePools().HasSynced() || !s.Services().HasSynced() {
		t.Error("collections not synced after New")
	}
}

// The fields of a Problem locate it; Error renders them.
func TestProblemFields(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "sub/pool.yaml", docs(goodPool("a"), pool("bad", vllmSelector, ports(9))))
	s := newSource(t, dir)
	var got *file.Problem
	for _, p := range s.Problems() {
		if p.Field != "" {
			got = &p
		}
	}
	want := &file.Problem{File: "sub/pool.yaml", Document: 2, Line: 17, Kind: "InferencePool", Namespace: "llm-namespace",
		Name: "bad", Field: "spec.targetPorts", Message: "Too many: 9: must have at most 8 items" + notChecked}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problem (-want +got):\n%s", diff)
	}
	if e := want.Error(); e != "sub/pool.yaml: document 2 (InferencePool llm-namespace/bad): spec.targetPorts: Too many: 9: must have at most 8 items"+notChecked {
		t.Errorf("Error() = %q", e)
	}
}

// Built-in kinds decode strictly; kinds of the scheme without a collection are
// accepted and ignored; metadata is validated.
func TestBuiltinStrictAndMeta(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", docs(
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports:\n  - port: 80\n    prot: TCP\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: 1\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Name\n",
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: two\nspec:\n  ports:\n  - port: 80\n  - port: 70000\n    name: b\n",
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: targets\nspec:\n  ports:\n  - port: 80\n    name: a\n    targetPort: 70000\n  - port: 81\n    name: Bad_Name\n    targetPort: Bad_Name\n",
	))
	s := newSource(t, dir)
	want := []string{
		`a.yaml: document 1 (Service default/s): spec.ports[0].prot: unknown field`,
		`a.yaml: document 3 (ConfigMap default/Not_A_Name): metadata.name: Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		`a.yaml: document 4 (Service default/two): spec.ports[0].name: Required value: when there are multiple ports`,
		`a.yaml: document 4 (Service default/two): spec.ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive`,
		`a.yaml: document 4 (Service default/two): spec.ports[1].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive`,
		`a.yaml: document 5 (Service default/targets): spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive`,
		`a.yaml: document 5 (Service default/targets): spec.ports[1].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		`a.yaml: document 5 (Service default/targets): spec.ports[1].targetPort: Invalid value: "Bad_Name": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`,
	}
	if diff := cmp.Diff(want, lines(problemText(s.Problems()))); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if n := len(s.Services().List()) + len(s.ConfigMaps().List()); n != 0 {
		t.Errorf("%d objects loaded, want none", n)
	}
}

// A DestinationRule is converted with kube.DestinationRuleFromUnstructured.
func TestDestinationRule(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dr.yaml", docs(
		"apiVersion: networking.istio.io/v1beta1\nkind: DestinationRule\nmetadata:\n  name: epp\nspec:\n  host: epp\n  trafficPolicy:\n    tls:\n      mode: SIMPLE\n      insecureSkipVerify: true\n",
		"apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: bad\nspec:\n  host: epp\n  trafficPolicy:\n    tls:\n      mode: SOMETIMES\n",
	))
	s := newSource(t, dir)
	dr := s.DestinationRules().GetKey("default/epp")
	if dr == nil || dr.Host != "epp" || dr.TLS == nil || dr.TLS.Mode != "SIMPLE" || !dr.TLS.InsecureSkipVerify {
		t.Errorf("default/epp = %+v", dr)
	}
	want := []string{`dr.yaml: document 2 (DestinationRule default/bad): spec.trafficPolicy.tls.mode: unknown mode "SOMETIMES"`}
	if diff := cmp.Diff(want, lines(problemText(s.Problems()))); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// The same object in two files read at once (a cold start): the first by
// path wins, deterministically.
func TestDuplicateFirstFileWins(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", configMap("c", "from-a"))
	write(t, dir, "b/c.yaml", configMap("c", "from-b"))
	s := newSource(t, dir)
	if cm := s.ConfigMaps().GetKey("llm-namespace/c"); cm == nil || (*cm).Data["key"] != "from-a" {
		t.Errorf("llm-namespace/c = %+v, want a.yaml's", cm)
	}
	want := []string{`b/c.yaml: document 1 (ConfigMap llm-namespace/c): already defined in a.yaml document 1, which is first by path: that one is served and this one is refused`}
	if diff := cmp.Diff(want, lines(problemText(s.Problems()))); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// Hidden files and folders are skipped; only manifest extensions are read;
// an unreadable folder fails New.
func TestFileSelection(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yml", configMap("yml", "1"))
	write(t, dir, "b.json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"json","namespace":"llm-namespace"}}`)
	write(t, dir, "notes.txt", configMap("txt", "1"))
	write(t, dir, ".hidden.yaml", configMap("hidden", "1"))
	write(t, dir, "..2026_01_01/c.yaml", configMap("in-hidden-dir", "1"))
	s := newSource(t, dir)
	var got []string
	for _, c := range s.ConfigMaps().List() {
		got = append(got, c.Name)
	}
	if diff := cmp.Diff([]string{"json", "yml"}, got); diff != "" {
		t.Errorf("config maps (-want +got):\n%s", diff)
	}
	if _, err := file.New(filepath.Join(dir, "missing"), file.Options{}); !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("New(missing) = %v, want a not-exist error", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return splitLines(s)
}

// A kind: List is expanded; its items are located by the List's document.
func TestList(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "list.yaml", `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: one, namespace: llm-namespace}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: two, namespace: llm-namespace}
  bogus: 1
`)
	s := newSource(t, dir)
	if s.ConfigMaps().GetKey("llm-namespace/one") == nil {
		t.Error("llm-namespace/one not loaded")
	}
	want := []string{`list.yaml: document 1 (ConfigMap llm-namespace/two): bogus: unknown field`}
	if diff := cmp.Diff(want, lines(problemText(s.Problems()))); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
