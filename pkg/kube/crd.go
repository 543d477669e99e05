// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// crdResource is the CustomResourceDefinition resource. It is read through
// the dynamic client so the build does not pull in
// k8s.io/apiextensions-apiserver for four fields.
var crdResource = schema.GroupVersionResource{
	Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
}

// crdKind names an optional CRD and the version of it that we read.
type crdKind struct {
	group, resource, version string
}

// name is the CRD's object name, "<resource>.<group>".
func (k crdKind) name() string { return k.resource + "." + k.group }

func (k crdKind) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.group, Version: k.version, Resource: k.resource}
}

// The optional CRDs: the control plane runs without them and starts their
// informers once they are installed.
var (
	inferencePoolCRD     = crdKind{group: "inference.networking.k8s.io", resource: "inferencepools", version: "v1"}
	grpcRouteCRD         = crdKind{group: "gateway.networking.k8s.io", resource: "grpcroutes", version: "v1"}
	backendTLSPolicyCRD  = crdKind{group: "gateway.networking.k8s.io", resource: "backendtlspolicies", version: "v1"}
	destinationRuleCRD   = crdKind{group: "networking.istio.io", resource: "destinationrules", version: "v1"}
	listenerSetCRD       = crdKind{group: "gateway.networking.k8s.io", resource: "listenersets", version: "v1"}
	tlsRouteCRD          = crdKind{group: "gateway.networking.k8s.io", resource: "tlsroutes", version: "v1"}
	tcpRouteCRD          = crdKind{group: "gateway.networking.k8s.io", resource: "tcproutes", version: "v1"}
	externalProcessorCRD = crdKind{group: "infermesh.io", resource: "externalprocessors", version: "v1alpha1"}
)

var optionalCRDs = []crdKind{inferencePoolCRD, grpcRouteCRD, backendTLSPolicyCRD, destinationRuleCRD, listenerSetCRD, tlsRouteCRD, tcpRouteCRD, externalProcessorCRD}

// crdState is all the CRD informer keeps of a CRD (whose full object, with
// its OpenAPI schema, is often over 100 kB): the name, the resourceVersion,
// whether it is Established, and the versions it serves. It embeds ObjectMeta
// so client-go's store can key it.
type crdState struct {
	metav1.ObjectMeta
	established bool
	served      []string
}

// serves reports whether the CRD is Established and serves version.
func (s *crdState) serves(version string) bool {
	return s.established && slices.Contains(s.served, version)
}

// crdTransform is the CRD informer's transform: unstructured CRD in,
// *crdState out. Idempotent; anything else passes through.
func crdTransform(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	return crdStateOf(u), nil
}

func crdStateOf(u *unstructured.Unstructured) *crdState {
	s := &crdState{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}}
	conds, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
	for _, c := range asMaps(conds) {
		if c["type"] == "Established" && c["status"] == "True" {
			s.established = true
		}
	}
	versions, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "versions")
	for _, v := range asMaps(versions) {
		name, _ := v["name"].(string)
		if served, _ := v["served"].(bool); served && name != "" {
			s.served = append(s.served, name)
		}
	}
	return s
}

// asMaps returns the elements of a JSON list that are objects; anything
// malformed reads as absent.
func asMaps(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// newCRDInformer watches the one CRD named name (a field selector keeps the
// list and watch to that object), keeping a *crdState per CRD.
func newCRDInformer(client dynamic.Interface, name string) cache.SharedIndexInformer {
	inf := dynamicinformer.NewFilteredDynamicInformer(client, crdResource, "", 0, cache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		},
	).Informer()
	_ = inf.SetTransform(crdTransform) // cannot fail: the informer is not running
	return inf
}
