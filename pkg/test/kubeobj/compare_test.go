// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeobj

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const live = `apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  namespace: ns
  uid: %s
  resourceVersion: "%s"
  creationTimestamp: "2026-12-03T10:00:00Z"
  managedFields: [{manager: %s}]
  labels: {app: x%s}
  annotations: {%s}
data: {k: %s}
`

// obj is a live ConfigMap as the API server returns it.
func obj(t *testing.T, uid, rv, manager, extraLabel, annotations, value string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Parse(fmt.Appendf(nil, live, uid, rv, manager, extraLabel, annotations, value))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestDiffIgnoresServerSetFields(t *testing.T) {
	a := obj(t, "u1", "1", "kubectl", "", "", "v")
	b := obj(t, "u2", "7", "helm", ", app.kubernetes.io/managed-by: Helm", "meta.helm.sh/release-name: r", "v")
	ign := Ignore{Labels: []string{"app.kubernetes.io/managed-by"}, Annotations: []string{"meta.helm.sh/release-name"}}
	if d := Diff(a, b, ign); d != "" {
		t.Errorf("objects that differ only in server-set and ignored fields: %s", d)
	}
	if d := Diff(a, b, Ignore{}); !strings.Contains(d, "managed-by") || !strings.Contains(d, "release-name") {
		t.Errorf("without Ignore, the installer's label and annotation must show:\n%s", d)
	}
	c := obj(t, "u3", "1", "kubectl", "", "", "w")
	if d := Diff(a, c, ign); !strings.Contains(d, "ConfigMap ns/c") || !strings.Contains(d, `"w"`) {
		t.Errorf("a changed data value must show, naming the object:\n%s", d)
	}
	if d := Diff(a, append(c, c...), ign); d == "" {
		t.Error("lists of different lengths compared equal")
	}
}

func TestFilesAndRead(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"20-b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"00-a.yaml": "# only a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n",
		"README.md": "not YAML",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := files, []string{filepath.Join(dir, "00-a.yaml"), filepath.Join(dir, "20-b.yaml")}; !slices.Equal(got, want) {
		t.Errorf("Files = %v, want %v", got, want)
	}
	objs, err := Read(files...)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	if want := []string{"Namespace/a", "ConfigMap/b"}; !slices.Equal(names, want) {
		t.Errorf("Read = %v, want %v (empty documents skipped, file order kept)", names, want)
	}
	if _, err := Files(t.TempDir()); err == nil {
		t.Error("Files of an empty folder: no error")
	}
}
