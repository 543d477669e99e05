// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/infermesh/infermesh/pkg/kube"
)

// isDestinationRule reports whether gvk is an Istio DestinationRule of a
// version Istio serves (v1, v1beta1, v1alpha3; same schema).
func isDestinationRule(gvk schema.GroupVersionKind) bool {
	if gvk.Group != kube.DestinationRuleGVR.Group || gvk.Kind != "DestinationRule" {
		return false
	}
	switch gvk.Version {
	case "v1", "v1beta1", "v1alpha3":
		return true
	}
	return false
}

// decodeDestinationRule reads a DestinationRule. Istio's CRD is not embedded
// (its module is not a dependency), so only what we can check is checked:
// unknown top-level and metadata fields, ObjectMeta rules, and the fields
// kube.DestinationRuleFromUnstructured reads.
func decodeDestinationRule(ref docRef, u map[string]any, res *decodeResult) {
	if ref.namespace == "" {
		ref.namespace = metav1.NamespaceDefault
	}
	id := objectID{group: kube.DestinationRuleGVR.Group, kind: "DestinationRule", namespace: ref.namespace, name: ref.name}
	meta, _, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u,
		schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		res.reject(id, ref.problem("metadata", "Invalid value: "+err.Error()))
		return
	}
	for k := range u {
		switch k {
		case "apiVersion", "kind", "metadata", "spec", "status":
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		for _, p := range unknown {
			res.problems = append(res.problems, ref.problem(p, "unknown field"))
		}
		res.reject(id)
		return
	}
	if meta == nil {
		meta = &metav1.ObjectMeta{}
	}
	meta.Namespace = ref.namespace
	if errs := validateMeta(meta, true, apivalidation.NameIsDNSSubdomain); len(errs) > 0 {
		res.reject(id, ref.fieldProblems(errs)...)
		return
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetNamespace(ref.namespace)
	dr, err := kube.DestinationRuleFromUnstructured(obj)
	if err != nil {
		res.reject(id, ref.problem("", err.Error()))
		return
	}
	res.objects = append(res.objects, object{
		id: id, coll: "DestinationRules", key: dr.ResourceName(), value: dr, digest: digestOf(dr), ref: ref,
	})
}
