// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
)

func pool(ns, name string) *inferencev1.InferencePool {
	return &inferencev1.InferencePool{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, ManagedFields: someManagedFields,
	}}
}

func inferencePoolCRDObject() *unstructured.Unstructured {
	return EstablishedCRD(inferencePoolCRD.group, inferencePoolCRD.resource, inferencePoolCRD.version)
}

// Without the CRD the collection is synced and empty; creating the CRD starts
// the informer; deleting it empties the collection; creating it again fills it.
func TestOptionalCollectionFollowsCRD(t *testing.T) {
	c := NewFake(pool("llm", "vllm-llama3-8b"))
	pools := c.InferencePools()
	startFake(t, c)

	synced(t, "InferencePools without CRD", pools)
	if n := len(pools.List()); n != 0 {
		t.Fatalf("without the CRD: %d pools, want 0", n)
	}

	ctx := context.Background()
	crds := c.Dynamic().Resource(crdResource)
	if _, err := crds.Create(ctx, inferencePoolCRDObject(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pool after CRD creation", func() bool { return pools.GetKey("llm/vllm-llama3-8b") != nil })
	if p := pools.GetKey("llm/vllm-llama3-8b"); (*p).ManagedFields != nil {
		t.Errorf("managedFields not stripped: %v", (*p).ManagedFields)
	}

	// Later pool changes flow through.
	if _, err := c.Inference().InferenceV1().InferencePools("llm").Create(ctx, pool("llm", "second"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "second pool", func() bool { return pools.GetKey("llm/second") != nil })

	if err := crds.Delete(ctx, inferencePoolCRD.name(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "empty after CRD deletion", func() bool { return len(pools.List()) == 0 })

	if _, err := crds.Create(ctx, inferencePoolCRDObject(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "refilled after CRD re-creation", func() bool { return len(pools.List()) == 2 })
}

// A CRD that exists but is not Established does not count until it is.
func TestOptionalCollectionWaitsForEstablished(t *testing.T) {
	crd := inferencePoolCRDObject()
	if err := unstructured.SetNestedSlice(crd.Object, []any{
		map[string]any{"type": "Established", "status": "False"},
	}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	c := NewFake(crd, pool("llm", "p"))
	pools := c.InferencePools()
	startFake(t, c)
	synced(t, "InferencePools", pools)
	if n := len(pools.List()); n != 0 {
		t.Fatalf("CRD not established: %d pools, want 0", n)
	}

	if _, err := c.Dynamic().Resource(crdResource).Update(context.Background(), inferencePoolCRDObject(), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pool once established", func() bool { return pools.GetKey("llm/p") != nil })
}

// With the CRD present from the start, the collection syncs only once the
// initial objects are in.
func TestOptionalCollectionSyncsWithInitialObjects(t *testing.T) {
	c := NewFake(append(OptionalCRDs(), pool("llm", "a"), pool("llm", "b"))...)
	pools := c.InferencePools()
	startFake(t, c)
	synced(t, "InferencePools", pools)
	if n := len(pools.List()); n != 2 {
		t.Fatalf("synced with %d pools, want 2", n)
	}
}

func TestCRDState(t *testing.T) {
	for _, tc := range []struct {
		name string
		crd  *unstructured.Unstructured
		want bool
	}{
		{"established, serves v1", EstablishedCRD("g", "rs", "v1"), true},
		{"serves only v1alpha2", EstablishedCRD("g", "rs", "v1alpha2"), false},
		{"no status", func() *unstructured.Unstructured {
			u := EstablishedCRD("g", "rs", "v1")
			unstructured.RemoveNestedField(u.Object, "status")
			return u
		}(), false},
		{"version not served", func() *unstructured.Unstructured {
			u := EstablishedCRD("g", "rs", "v1")
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "v1", "served": false}}, "spec", "versions")
			return u
		}(), false},
		{"malformed conditions", func() *unstructured.Unstructured {
			u := EstablishedCRD("g", "rs", "v1")
			_ = unstructured.SetNestedField(u.Object, "Established", "status", "conditions")
			return u
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := crdTransform(tc.crd)
			if err != nil {
				t.Fatal(err)
			}
			st := obj.(*crdState)
			if st.Name != "rs.g" || st.serves("v1") != tc.want {
				t.Errorf("name %q serves(v1) = %v, want %v", st.Name, st.serves("v1"), tc.want)
			}
			if again, _ := crdTransform(st); again != any(st) {
				t.Error("transform is not idempotent")
			}
		})
	}
}
