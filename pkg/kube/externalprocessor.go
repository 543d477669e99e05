// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"fmt"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// ExternalProcessors returns all infermesh.io ExternalProcessors, read
// through the dynamic client; optional (the chart installs the CRD). One
// that cannot be read as the type is logged with its key and left out.
func (c *Client) ExternalProcessors() krt.Collection[*imv1alpha1.ExternalProcessor] {
	return optionalCollectionFor(c, "ExternalProcessors", externalProcessorCRD, func() cache.SharedIndexInformer {
		inf := dynamicinformer.NewFilteredDynamicInformer(c.dynamic, imv1alpha1.ExternalProcessorsGVR, "", c.opts.resync, cache.Indexers{}, nil).Informer()
		_ = inf.SetTransform(externalProcessorTransform) // cannot fail: the informer is not running
		return inf
	}, externalProcessorConvert)
}

// externalProcessorObject is what the informer stores: the typed object,
// or why the unstructured one could not be read as it.
type externalProcessorObject struct {
	metav1.ObjectMeta
	ep  *imv1alpha1.ExternalProcessor
	err error
}

// externalProcessorTransform converts unstructured to the typed object;
// idempotent.
func externalProcessorTransform(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	ep := &imv1alpha1.ExternalProcessor{}
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ep)
	if err != nil {
		slog.Warn("kube: ignoring malformed ExternalProcessor", "key", u.GetNamespace()+"/"+u.GetName(), "error", err)
	}
	ep.ManagedFields = nil
	return &externalProcessorObject{
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), ResourceVersion: u.GetResourceVersion()},
		ep:         ep, err: err,
	}, nil
}

func externalProcessorConvert(obj any) (*imv1alpha1.ExternalProcessor, bool) {
	o, ok := obj.(*externalProcessorObject)
	if !ok {
		slog.Error("kube: ExternalProcessor informer delivered an unexpected type", "got", fmt.Sprintf("%T", obj))
		return nil, false
	}
	return o.ep, o.err == nil
}
