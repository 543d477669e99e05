// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// CRDFieldManager is the field manager that ApplyCRDs applies CRDs with.
const CRDFieldManager = "kubeenv"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ApplyCRDs server-side applies (forced, CRDFieldManager) every
// apiextensions.k8s.io/v1 CustomResourceDefinition in the YAML or JSON files at
// paths, which may hold several documents each, and waits up to 30 s for each
// to be Established. Documents of other kinds (Gateway API's standard install
// also holds a ValidatingAdmissionPolicy) are skipped, with a log line. It fails
// the test on an unreadable or undecodable file, an apply error, or a CRD that
// does not become established.
//
// It uses the dynamic client, so the repository needs no apiextensions module.
func (e *Env) ApplyCRDs(paths ...string) {
	e.t.Helper()
	client, err := dynamic.NewForConfig(e.RESTConfig())
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, path := range paths {
		crds, skipped, err := readCRDs(path)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, s := range skipped {
			e.t.Logf("kubeenv: ApplyCRDs skips %s in %s: not a CustomResourceDefinition", s, path)
		}
		for _, crd := range crds {
			if err := applyCRD(ctx, client, crd); err != nil {
				e.t.Fatalf("kubeenv: %s: %v", path, err)
			}
		}
	}
}

// readCRDs decodes every non-empty document of the file at path, and returns
// the v1 CustomResourceDefinitions and the "apiVersion kind name" of the others.
func readCRDs(path string) (crds []*unstructured.Unstructured, skipped []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeenv: CRDs: %w", err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return crds, skipped, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("kubeenv: CRDs in %s: %w", path, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAPIVersion() != "apiextensions.k8s.io/v1" || u.GetKind() != "CustomResourceDefinition" {
			skipped = append(skipped, u.GetAPIVersion()+" "+u.GetKind()+" "+u.GetName())
			continue
		}
		crds = append(crds, u)
	}
}

// applyCRD applies crd and polls until its Established condition is True.
func applyCRD(ctx context.Context, client dynamic.Interface, crd *unstructured.Unstructured) error {
	crds := client.Resource(crdResource)
	if _, err := crds.Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: CRDFieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply CRD %s: %w", crd.GetName(), err)
	}
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		live, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", crd.GetName(), err)
	}
	return nil
}
