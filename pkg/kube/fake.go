// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"

	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	inferencefake "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned/fake"
	inferencescheme "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned/scheme"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	gatewayscheme "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/scheme"
)

// NewFake returns a Client over client-go fakes, for unit tests. Each object
// goes to the fake that serves its type: core types to the Kubernetes
// clientset, Gateway API types to the Gateway API clientset, InferencePools
// to the inference extension clientset, and *unstructured.Unstructured
// objects (CRDs, DestinationRules, anything else) to the dynamic client. An
// object no fake serves panics, naming its type.
//
// Like a real cluster, the fake has no optional CRDs unless given: pass
// OptionalCRDs() (or some EstablishedCRD objects) to have InferencePools,
// GRPCRoutes, BackendTLSPolicies, DestinationRules, ListenerSets, TLSRoutes and
// TCPRoutes served; create them
// later through Dynamic() to test a CRD installed while running.
func NewFake(objects ...runtime.Object) *Client {
	return newFake(nil, objects...)
}

// newFake is NewFake with options; tests in this package use it for
// WithDebugging. Options that configure the connection (QPS, burst) have no
// effect on fakes.
func newFake(opts []Option, objects ...runtime.Object) *Client {
	var kubeObjs, gatewayObjs, inferenceObjs, dynamicObjs []runtime.Object
	listKinds := map[schema.GroupVersionResource]string{
		crdResource:                      "CustomResourceDefinitionList",
		DestinationRuleGVR:               "DestinationRuleList",
		imv1alpha1.ExternalProcessorsGVR: "ExternalProcessorList",
	}
	for _, obj := range objects {
		switch {
		case isUnstructured(obj):
			gvk := obj.GetObjectKind().GroupVersionKind()
			gvr := resourceFor(gvk)
			if _, known := listKinds[gvr]; !known {
				listKinds[gvr] = gvk.Kind + "List"
			}
			dynamicObjs = append(dynamicObjs, obj)
		case recognizes(kubescheme.Scheme, obj):
			kubeObjs = append(kubeObjs, obj)
		case recognizes(gatewayscheme.Scheme, obj):
			gatewayObjs = append(gatewayObjs, obj)
		case recognizes(inferencescheme.Scheme, obj):
			inferenceObjs = append(inferenceObjs, obj)
		default:
			panic(fmt.Sprintf("kube.NewFake: no fake clientset serves %T", obj))
		}
	}
	o, err := buildOptions(opts)
	if err != nil {
		panic("kube: " + err.Error())
	}
	// The Gateway API and inference extension fakes are the simple kind: the
	// inference extension's field-managed NewClientset cannot create objects
	// (its fake ships no structured-merge schema). Preset objects are added
	// with Create under the right resource, because the fakes' own Add
	// guesses the resource from the kind and files a Gateway under
	// "gatewaies".
	gateway := gatewayfake.NewSimpleClientset()
	addTyped(gateway.Tracker(), gatewayscheme.Scheme, gatewayObjs)
	inference := inferencefake.NewSimpleClientset()
	addTyped(inference.Tracker(), inferencescheme.Scheme, inferenceObjs)
	dynamic := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	for _, obj := range dynamicObjs {
		create(dynamic.Tracker(), obj.GetObjectKind().GroupVersionKind(), obj)
	}
	return newClient(clientsets{
		kube:      kubefake.NewClientset(kubeObjs...),
		gateway:   gateway,
		inference: inference,
		dynamic:   dynamic,
	}, o)
}

// irregularResources are the plurals that meta.UnsafeGuessKindToResource
// gets wrong among the kinds we use.
var irregularResources = map[string]string{"Gateway": "gateways", "Endpoints": "endpoints"}

// resourceFor returns the resource of gvk.
func resourceFor(gvk schema.GroupVersionKind) schema.GroupVersionResource {
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	if r, ok := irregularResources[gvk.Kind]; ok {
		gvr.Resource = r
	}
	return gvr
}

// addTyped creates each object in tracker under its resource (its v1 kind
// when the scheme registers the type under several versions).
func addTyped(tracker k8stesting.ObjectTracker, s *runtime.Scheme, objs []runtime.Object) {
	for _, obj := range objs {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil {
			panic(fmt.Sprintf("kube.NewFake: %T: %v", obj, err))
		}
		gvk := gvks[0]
		for _, k := range gvks {
			if k.Version == "v1" {
				gvk = k
			}
		}
		create(tracker, gvk, obj)
	}
}

func create(tracker k8stesting.ObjectTracker, gvk schema.GroupVersionKind, obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(fmt.Sprintf("kube.NewFake: %T: %v", obj, err))
	}
	if err := tracker.Create(resourceFor(gvk), obj, m.GetNamespace()); err != nil {
		panic(fmt.Sprintf("kube.NewFake: %s %s/%s: %v", gvk.Kind, m.GetNamespace(), m.GetName(), err))
	}
}

func isUnstructured(obj runtime.Object) bool {
	_, ok := obj.(runtime.Unstructured)
	return ok
}

func recognizes(s *runtime.Scheme, obj runtime.Object) bool {
	_, _, err := s.ObjectKinds(obj)
	return err == nil
}

// EstablishedCRD returns a minimal CustomResourceDefinition, named
// "<resource>.<group>", that serves versions and is Established: what the
// optional collections wait for. For fakes.
func EstablishedCRD(group, resource string, versions ...string) *unstructured.Unstructured {
	vs := make([]any, len(versions))
	for i, v := range versions {
		vs[i] = map[string]any{"name": v, "served": true, "storage": i == 0}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": resource + "." + group},
		"spec": map[string]any{
			"group":    group,
			"names":    map[string]any{"plural": resource},
			"scope":    "Namespaced",
			"versions": vs,
		},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True"},
			map[string]any{"type": "Established", "status": "True"},
		}},
	}}
}

// OptionalCRDs returns an Established CRD for each optional type
// (InferencePool, GRPCRoute, BackendTLSPolicy, DestinationRule, ListenerSet,
// TLSRoute, TCPRoute),
// for NewFake.
func OptionalCRDs() []runtime.Object {
	out := make([]runtime.Object, len(optionalCRDs))
	for i, k := range optionalCRDs {
		out[i] = EstablishedCRD(k.group, k.resource, k.version)
	}
	return out
}
