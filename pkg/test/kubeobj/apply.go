// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeobj

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the field manager of Apply, kubectl's own, as
// `kubectl apply --server-side` would record.
const FieldManager = "kubectl"

// Applier applies objects to one cluster and reads them back.
type Applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

// NewApplier discovers the cluster's kinds once: create CRDs before it.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDiscoveryRESTMapper(groups)}, nil
}

// resource is the client for u's kind, in u's namespace when namespaced.
func (a *Applier) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk, u.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			return nil, fmt.Errorf("%s %s: namespaced, but the object names no namespace", gvk.Kind, u.GetName())
		}
		return a.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

// Apply server-side applies each object in order, as FieldManager, with
// strict field validation, and stops at the first the API server refuses.
func (a *Applier) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, u := range objs {
		r, err := a.resource(u)
		if err != nil {
			return err
		}
		body, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		if _, err := r.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
			FieldManager: FieldManager, Force: &force, FieldValidation: "Strict",
		}); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}

// Live reads each object's live version from the cluster, in order.
func (a *Applier) Live(ctx context.Context, objs ...*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		r, err := a.resource(u)
		if err != nil {
			return nil, err
		}
		live, err := r.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, live)
	}
	return out, nil
}

// ApplyDir applies the *.yaml files of dir in name order (Files, Read,
// Apply), as `kubectl apply --server-side -f dir` does, and returns the
// objects as parsed from the files. Any error fails the test.
func ApplyDir(t testing.TB, cfg *rest.Config, dir string) []*unstructured.Unstructured {
	t.Helper()
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Read(files...)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(t.Context(), objs...); err != nil {
		t.Fatal(err)
	}
	return objs
}
