// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package install_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// manifestsDir is the repository's manifests folder, from this package's
// folder (go test runs a package in its own folder).
const manifestsDir = "../../../manifests"

// manifestFiles returns the YAML files of manifests/ in the order an
// installer applies them (their names sort in that order).
func manifestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no YAML files in %s", manifestsDir)
	}
	slices.Sort(files)
	return files
}

// readManifests parses every document of the files, in order.
func readManifests(t *testing.T, files ...string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			err := dec.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 { // an empty document
				continue
			}
			objs = append(objs, u)
		}
	}
	return objs
}

// applyManifests creates every object of files as shipped, with strict field
// validation (an unknown or duplicate field fails the test), as the admin
// user, and returns them as parsed.
func applyManifests(t *testing.T, cfg *rest.Config, files ...string) []*unstructured.Unstructured {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs := readManifests(t, files...)
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				t.Fatalf("%s %s: namespaced, but the manifest names no namespace", gvk.Kind, u.GetName())
			}
			ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := ri.Create(t.Context(), u, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("apply %s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
	}
	return objs
}
