// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"context"
	"fmt"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	"github.com/infermesh/infermesh/pkg/kube"
)

// customKind is a CRD kind that has a collection: its Go type (always the v1
// type; every served version of these CRDs has the same schema and the CRDs
// convert with strategy None, so only apiVersion changes) and collection name.
type customKind struct {
	coll   string
	newObj func() runtime.Object
}

var customKinds = map[schema.GroupKind]customKind{
	{Group: gatewayv1.GroupName, Kind: "Gateway"}:          {"Gateways", func() runtime.Object { return &gatewayv1.Gateway{} }},
	{Group: gatewayv1.GroupName, Kind: "GatewayClass"}:     {"GatewayClasses", func() runtime.Object { return &gatewayv1.GatewayClass{} }},
	{Group: gatewayv1.GroupName, Kind: "HTTPRoute"}:        {"HTTPRoutes", func() runtime.Object { return &gatewayv1.HTTPRoute{} }},
	{Group: gatewayv1.GroupName, Kind: "GRPCRoute"}:        {"GRPCRoutes", func() runtime.Object { return &gatewayv1.GRPCRoute{} }},
	{Group: gatewayv1.GroupName, Kind: "TLSRoute"}:         {"TLSRoutes", func() runtime.Object { return &gatewayv1.TLSRoute{} }},
	{Group: gatewayv1.GroupName, Kind: "TCPRoute"}:         {"TCPRoutes", func() runtime.Object { return &gatewayv1.TCPRoute{} }},
	{Group: gatewayv1.GroupName, Kind: "ReferenceGrant"}:   {"ReferenceGrants", func() runtime.Object { return &gatewayv1.ReferenceGrant{} }},
	{Group: gatewayv1.GroupName, Kind: "BackendTLSPolicy"}: {"BackendTLSPolicies", func() runtime.Object { return &gatewayv1.BackendTLSPolicy{} }},
	{Group: gatewayv1.GroupName, Kind: "ListenerSet"}:      {"ListenerSets", func() runtime.Object { return &gatewayv1.ListenerSet{} }},
	{Group: inferencev1.GroupName, Kind: "InferencePool"}:  {"InferencePools", func() runtime.Object { return &inferencev1.InferencePool{} }},
	{Group: imv1alpha1.GroupName, Kind: imv1alpha1.ExternalProcessorKind}: {"ExternalProcessors", func() runtime.Object {
		return &imv1alpha1.ExternalProcessor{}
	}},
}

// decodeCustom does to u what the API server does to a created custom
// resource, in its order:
//
//  1. decoding (unstructuredSchemaCoercer): unknown metadata fields, pruning of
//     fields the schema does not declare, dropping nulls of non-nullable
//     fields, coercion of embedded metadata. With strict field validation
//     (kubectl --validate=strict) every pruned field is an error;
//  2. the namespace: "default" when a namespaced object has none, none for a
//     cluster-scoped one;
//  3. structural defaulting;
//  4. validation (customResourceStrategy.Validate): ObjectMeta rules (name a
//     DNS subdomain), the OpenAPI schema, embedded ObjectMeta, list-type
//     invariants, then the CEL rules unless an earlier error blocks them.
func (d *decoder) decodeCustom(ref docRef, v *crdVersion, u map[string]any, res *decodeResult) {
	id := objectID{group: v.gvk.Group, kind: v.gvk.Kind, name: ref.name}
	if v.namespaced {
		id.namespace = ref.namespace
		if id.namespace == "" {
			id.namespace = metav1.NamespaceDefault
		}
	}
	ref.namespace = id.namespace
	if err := v.build(); err != nil {
		res.reject(id, ref.problem("", "internal error: embedded CRD: "+err.Error()))
		return
	}
	s := v.structural

	meta, unknown, ferr := coerceCustom(u, s)
	if ferr != nil {
		res.reject(id, ref.fieldProblems(field.ErrorList{ferr})...)
		return
	}
	if len(unknown) > 0 {
		for _, p := range unknown {
			res.problems = append(res.problems, ref.problem(p, "unknown field"))
		}
		res.reject(id)
		return
	}
	meta.Namespace = id.namespace
	if err := schemaobjectmeta.SetObjectMeta(u, meta); err != nil {
		res.reject(id, ref.problem("metadata", "Invalid value: "+err.Error()))
		return
	}
	structuraldefaulting.Default(u, s)

	errs := validateCustom(v, meta, u)
	if len(errs) > 0 {
		ps := ref.fieldProblems(errs)
		if v.cel != nil {
			// The API server also lists, as an error without a field,
			// "some validation rules were not checked because the object
			// was invalid; ...": one problem, not two, so it is said on
			// the errors that caused it.
			for i, e := range errs {
				if blockingError(field.ErrorList{e}) {
					ps[i].Message += " (because of this, the CRD's validation rules were not checked: fix it and check again)"
				}
			}
		}
		res.reject(id, ps...)
		return
	}

	// Served as v1, the version of our Go types (and the digest with it, so
	// switching a manifest between served versions is no change).
	u["apiVersion"] = v.gvk.Group + "/v1"
	ck, stored := customKinds[v.gvk.GroupKind()]
	if !stored {
		res.objects = append(res.objects, object{id: id, ref: ref, digest: digestOf(u)})
		return
	}
	typed := ck.newObj()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, typed); err != nil {
		res.reject(id, ref.problem("", fmt.Sprintf("internal error: converting to %T: %v", typed, err)))
		return
	}
	_, _ = kube.StripManagedFields(typed) // as the cluster-mode informers do; the digest above has them
	res.objects = append(res.objects, object{
		id: id, coll: ck.coll, key: namespacedKey(id.namespace, id.name),
		value: typed, digest: digestOf(u), ref: ref,
		specDigest: specDigest(typed), // here, on every core, rather than in load
	})
}

// coerceCustom is step 1 of decodeCustom: it reads metadata, prunes u in
// place and returns the metadata and every unknown field path, sorted.
func coerceCustom(u map[string]any, s *structuralschema.Structural) (*metav1.ObjectMeta, []string, *field.Error) {
	meta, _, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u,
		schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		if ferr := creationTimestampError(u); ferr != nil {
			return nil, nil, ferr
		}
		return nil, nil, field.Invalid(field.NewPath("metadata"), nil, err.Error())
	}
	if meta == nil {
		meta = &metav1.ObjectMeta{}
	}
	unknown = append(unknown, structuralpruning.PruneWithOptions(u, s, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u, s)
	ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u, s, false,
		schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if ferr != nil {
		return nil, nil, ferr
	}
	return meta, append(unknown, paths...), nil
}

// validateCustom is step 4 of decodeCustom.
func validateCustom(v *crdVersion, meta *metav1.ObjectMeta, u map[string]any) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateMeta(meta, v.namespaced, apivalidation.NameIsDNSSubdomain)...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u, v.validator)...)
	errs = append(errs, schemaobjectmeta.Validate(context.Background(), nil, u, v.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, v.structural, u)...)
	if v.cel == nil {
		return errs
	}
	if blockingError(errs) {
		// As the API server does, skip the CEL rules, which would fail in
		// confusing ways on such an object (decodeCustom says so on the
		// blocking errors).
		return errs
	}
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, u, nil, celCostBudget)
	return append(errs, celErrs...)
}

// blockingError reports whether errs hold an error after which the API server
// does not run CEL rules (customresource strategy's hasBlockingErr).
func blockingError(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong,
			field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// validateMeta is the API server's ObjectMeta validation for a create, less
// generateName (a file must name its objects).
func validateMeta(meta *metav1.ObjectMeta, namespaced bool, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	if meta.Name == "" && meta.GenerateName != "" {
		return field.ErrorList{field.Required(field.NewPath("metadata", "name"),
			"generateName is not supported in files: set metadata.name")}
	}
	return apivalidation.ValidateObjectMeta(meta, namespaced, nameFn, field.NewPath("metadata"))
}
