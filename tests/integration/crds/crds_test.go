// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package crds installs every CRD the control plane and the full endpoint
// picker need (kubeenv's standard ones, InferenceObjective, DestinationRule)
// into a real cluster and creates objects of the non-standard kinds.
package crds

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

var (
	destinationRules    = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}
	inferenceObjectives = schema.GroupVersionResource{Group: "inference.networking.x-k8s.io", Version: "v1alpha2", Resource: "inferenceobjectives"}
)

func TestSeedDestinationRuleAndInferenceObjective(t *testing.T) {
	objective, err := kubeenv.InferenceObjectiveCRD()
	if err != nil {
		t.Fatal(err)
	}
	dr, err := kubeenv.DestinationRuleCRD()
	if err != nil {
		t.Fatal(err)
	}
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs(), kubeenv.WithCRDs(objective, dr))
	client, err := dynamic.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The seed's DestinationRule: TLS to the endpoint picker, unverified.
	seed := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1",
		"kind":       "DestinationRule",
		"metadata":   map[string]any{"name": "vllm-llama3-8b-epp", "namespace": "default"},
		"spec": map[string]any{
			"host": "vllm-llama3-8b-epp",
			"trafficPolicy": map[string]any{
				"tls": map[string]any{"mode": "SIMPLE", "insecureSkipVerify": true},
			},
		},
	}}
	created, err := client.Resource(destinationRules).Namespace("default").Create(ctx, seed, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.Resource(destinationRules).Namespace("default").Get(ctx, created.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := unstructured.NestedString(got.Object, "spec", "host")
	mode, _, _ := unstructured.NestedString(got.Object, "spec", "trafficPolicy", "tls", "mode")
	skip, _, _ := unstructured.NestedBool(got.Object, "spec", "trafficPolicy", "tls", "insecureSkipVerify")
	if host != "vllm-llama3-8b-epp" || mode != "SIMPLE" || !skip {
		t.Errorf("DestinationRule read back as host %q, tls mode %q, insecureSkipVerify %v", host, mode, skip)
	}

	// The CRD's schema is enforced: an unknown TLS mode is rejected.
	bad := seed.DeepCopy()
	bad.SetName("bad-tls-mode")
	if err := unstructured.SetNestedField(bad.Object, "NOT_A_MODE", "spec", "trafficPolicy", "tls", "mode"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Resource(destinationRules).Namespace("default").Create(ctx, bad, metav1.CreateOptions{}); err == nil {
		t.Error("a DestinationRule with tls mode NOT_A_MODE was accepted")
	}

	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.x-k8s.io/v1alpha2",
		"kind":       "InferenceObjective",
		"metadata":   map[string]any{"name": "chat", "namespace": "default"},
		"spec": map[string]any{
			"priority": int64(1),
			"poolRef":  map[string]any{"name": "vllm-llama3-8b"},
		},
	}}
	if _, err := client.Resource(inferenceObjectives).Namespace("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
