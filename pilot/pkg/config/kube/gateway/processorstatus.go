// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	"github.com/infermesh/infermesh/pkg/kube/apply"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/writer"
)

// ExternalProcessorStatus is the status of one infermesh.io
// ExternalProcessor: its Accepted and ResolvedRefs conditions
// (ProcessorConditions).
type ExternalProcessorStatus struct {
	Namespace, Name string
	Conditions      []metav1.Condition
}

// ResourceName is the krt key: namespace/name.
func (s ExternalProcessorStatus) ResourceName() string { return s.Namespace + "/" + s.Name }

// processorStatusCollection is Outputs.ExternalProcessorStatuses: every
// ExternalProcessor resolved as a listener filter naming it would resolve
// it (its Service port and client TLS read in its own namespace, the
// listener's), whether or not a listener names it yet.
func (b *builder) processorStatusCollection() krt.Collection[ExternalProcessorStatus] {
	opts := BackendOptions{InferenceEnabled: b.opts.InferenceEnabled, ClusterDomain: b.opts.ClusterDomain}
	return krt.NewCollection(b.in.ExternalProcessors, func(ctx krt.HandlerContext, ep *imv1alpha1.ExternalProcessor) *ExternalProcessorStatus {
		res := ResolveExternalProcessor(ep, b.serviceLookups(ctx, func() []string { return []string{ep.Namespace} }), opts)
		return &ExternalProcessorStatus{Namespace: ep.Namespace, Name: ep.Name, Conditions: ProcessorConditions(res, ep.Generation)}
	}, b.with("ExternalProcessorStatuses")...)
}

// processorStatusWriter writes each ExternalProcessor's status.conditions
// (ours alone: the kind is infermesh's own) with server-side apply of the
// status subresource, through the dynamic client (the kind has no typed
// client). An unchanged status is not written.
func processorStatusWriter(cfg ControllerConfig, desired krt.Collection[ExternalProcessorStatus]) (func(context.Context), error) {
	type obj = *unstructured.Unstructured
	dyn := cfg.Client.Dynamic()
	w, err := writer.NewOwnedStatusWriter(writer.OwnedStatusConfig[obj, ExternalProcessorStatus, obj]{
		Name: "externalprocessor-status", Desired: desired,
		Status: apply.OwnedStatus[obj, obj]{FieldManager: cfg.Features.ControllerName, ExtractStatus: extractProcessorStatus},
		Client: func(ns string) apply.StatusClient[obj, obj] {
			return dynamicStatusClient{dyn.Resource(imv1alpha1.ExternalProcessorsGVR).Namespace(ns)}
		},
		Build: func(live obj, d ExternalProcessorStatus) (obj, error) {
			var liveStatus imv1alpha1.ExternalProcessorStatus
			if st, ok := live.Object["status"].(map[string]any); ok {
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st, &liveStatus); err != nil {
					return nil, fmt.Errorf("live status: %w", err)
				}
			}
			return processorStatusObject(live, imv1alpha1.ExternalProcessorStatus{
				Conditions: stampConditions(d.Conditions, liveStatus.Conditions)})
		},
		IsLeader: cfg.IsLeader,
	})
	if err != nil {
		return nil, err
	}
	return w.Run, nil
}

// processorStatusObject is the apply configuration of live's status st:
// apiVersion, kind, name, namespace and status only.
func processorStatusObject(live *unstructured.Unstructured, st imv1alpha1.ExternalProcessorStatus) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return nil, err
	}
	// Through JSON, so numbers and times have the form a live object read
	// from the API server has (the comparison with it is deep).
	b, err := json.Marshal(map[string]any{
		"apiVersion": imv1alpha1.SchemeGroupVersion.String(), "kind": imv1alpha1.ExternalProcessorKind,
		"metadata": map[string]any{"name": live.GetName(), "namespace": live.GetNamespace()},
		"status":   m,
	})
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return out, nil
}

// extractProcessorStatus is the status part of live as an apply
// configuration: the whole status (only we write it).
func extractProcessorStatus(live *unstructured.Unstructured, _ string) (*unstructured.Unstructured, error) {
	var st imv1alpha1.ExternalProcessorStatus
	if m, ok := live.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
			return nil, err
		}
	}
	return processorStatusObject(live, st)
}

// dynamicStatusClient is apply.StatusClient over the dynamic client.
type dynamicStatusClient struct{ ri dynamic.ResourceInterface }

func (c dynamicStatusClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error) {
	return c.ri.Get(ctx, name, opts)
}

func (c dynamicStatusClient) ApplyStatus(ctx context.Context, ac *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	return c.ri.ApplyStatus(ctx, ac.GetName(), ac, opts)
}
