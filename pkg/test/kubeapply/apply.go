// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeapply

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/infermesh/infermesh/pkg/test/kubeobj"
)

// Applier server-side applies YAML documents under one field manager.
type Applier struct {
	client       dynamic.Interface
	mapper       meta.ResettableRESTMapper
	fieldManager string
}

// New returns an Applier for the cluster cfg points to, applying as
// fieldManager (kubectl's is "kubectl").
func New(cfg *rest.Config, fieldManager string) (*Applier, error) {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		fieldManager: fieldManager}, nil
}

// ApplyDir applies every *.yaml file of dir (not its subfolders) in name
// order (manifests/ and examples/seed name their files so that order is the
// install order), and returns the objects applied, as "Kind ns/name" (or
// "Kind name" for cluster-scoped ones). An error names the file and object.
func (a *Applier) ApplyDir(ctx context.Context, dir string) ([]string, error) {
	paths, err := kubeobj.Files(dir)
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return applied, err
		}
		objs, err := a.Apply(ctx, data)
		applied = append(applied, objs...)
		if err != nil {
			return applied, fmt.Errorf("%s: %w", p, err)
		}
	}
	return applied, nil
}

// Apply applies each document of data in order and returns the objects
// applied, as ApplyDir does.
func (a *Applier) Apply(ctx context.Context, data []byte) ([]string, error) {
	objs, err := kubeobj.Parse(data)
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, obj := range objs {
		name := obj.GetKind() + " " + obj.GetName()
		if obj.GetNamespace() != "" {
			name = obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
		}
		if err := a.applyObject(ctx, obj); err != nil {
			return applied, fmt.Errorf("%s: %w", name, err)
		}
		applied = append(applied, name)
	}
	return applied, nil
}

func (a *Applier) applyObject(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.mapper.Reset() // a kind whose CRD was installed since the last discovery
		if m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return err
		}
	}
	var r dynamic.ResourceInterface = a.client.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = a.client.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = r.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: a.fieldManager, Force: ptr.To(true)})
	return err
}
