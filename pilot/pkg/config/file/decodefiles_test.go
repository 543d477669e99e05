// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadFilesIsEachFileDecoded: readFiles, which decodes the documents of
// all files together, custom resources first, on every core, gives for each
// file what decoding its documents one after the other gives: the same
// objects, problems and rejections, in the same order.
func TestReadFilesIsEachFileDecoded(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for f := range 4 {
		var ds []string
		for i := range 40 {
			name := fmt.Sprintf("o-%d-%d", f, i)
			switch (i + f) % 5 {
			case 0:
				ds = append(ds, fmt.Sprintf("apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: %s, namespace: ns}\nspec:\n  selector: {matchLabels: {app: a}}\n  targetPorts: [{number: 8000}]\n  endpointPickerRef: {name: epp, port: {number: 9002}}\n", name))
			case 1:
				ds = append(ds, fmt.Sprintf("apiVersion: inference.networking.k8s.io/v1\nkind: \"InferencePool\"\nmetadata: {name: %s}\nspec: {targetPorts: []}\n", name))
			case 2:
				ds = append(ds, fmt.Sprintf("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: %s, namespace: ns}\nspec: {hostnames: [%s.example.com]}\n", name, name))
			case 3:
				ds = append(ds, "a: [unterminated\n")
			default:
				ds = append(ds, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: ns}\nspec: {containers: [{name: c, image: i}]}\n", name))
			}
		}
		name := fmt.Sprintf("f%d.yaml", f)
		files[name] = strings.Join(ds, "---\n")
		if err := os.WriteFile(filepath.Join(dir, name), []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	crds, err := embeddedCRDs()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"f0.yaml", "f1.yaml", "f2.yaml", "f3.yaml", "missing.yaml"}
	s := &Source{dir: dir, dec: &decoder{crds: crds}}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	fds, unread := s.readFiles(names)
	for i, name := range names {
		if name == "missing.yaml" {
			if fds[i] != nil || !strings.Contains(unread[i].Message, "cannot read") {
				t.Errorf("%s: decoding %v, problem %+v; want none and a problem", name, fds[i], unread[i])
			}
			continue
		}
		// The reference: each document decoded in turn, results appended.
		alone := &fileDecode{}
		for _, d := range splitDocuments([]byte(files[name])) {
			r := s.decodeDocument(name, d)
			alone.objects = append(alone.objects, r.objects...)
			alone.problems = append(alone.problems, r.problems...)
			alone.rejected = append(alone.rejected, r.rejected...)
			alone.broken = alone.broken || r.broken
		}
		got := fds[i]
		if len(got.objects) == 0 || len(got.problems) == 0 || !got.broken {
			t.Fatalf("%s: want objects, problems and a broken document; got %d, %d, %v", name, len(got.objects), len(got.problems), got.broken)
		}
		keys := func(fd *fileDecode) []string {
			var out []string
			for _, o := range fd.objects {
				out = append(out, fmt.Sprintf("%s %d %x %x", o.key, o.ref.doc, o.digest, o.specDigest))
			}
			return out
		}
		if d := cmp.Diff(keys(alone), keys(got)); d != "" {
			t.Errorf("%s: objects differ (-alone +together):\n%s", name, d)
		}
		if d := cmp.Diff(problemStrings(alone.problems), problemStrings(got.problems)); d != "" {
			t.Errorf("%s: problems differ (-alone +together):\n%s", name, d)
		}
		if d := cmp.Diff(alone.rejected, got.rejected, cmp.AllowUnexported(objectID{})); d != "" {
			t.Errorf("%s: rejected differ (-alone +together):\n%s", name, d)
		}
	}
}

func TestCustomKindFirst(t *testing.T) {
	kinds := map[string]bool{"InferencePool": true, "HTTPRoute": true}
	for text, want := range map[string]bool{
		"apiVersion: v1\nkind: InferencePool\n":       true,
		"kind: 'HTTPRoute'\nspec: {}\n":               true,
		"metadata:\n  kind: InferencePool\nkind: Pod": false,
		"kind: Pod\n":            false,
		"kind: InferencePoolX\n": false,
		"apiVersion: v1\n":       false,
	} {
		if got := customKindFirst([]byte(text), kinds); got != want {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
	}
}
