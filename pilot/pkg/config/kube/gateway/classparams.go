// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// GatewayClass parameters: a class of ours may name a ConfigMap in
// spec.parametersRef (Istio's convention: group "", kind ConfigMap,
// namespace set, since a GatewayClass is cluster-scoped). Its data keys are
// the class's settings; every Gateway of the class gets them, and a change
// applies to existing Gateways at the next push (architecture/xds.md, "EPP
// request body mode").
const (
	// EPPRequestBodyModeKey selects how request bodies reach the Endpoint
	// Pickers of the class's Gateways: EPPRequestBodyModeFullDuplex (the
	// default when the key is absent) or EPPRequestBodyModeStreamed.
	EPPRequestBodyModeKey = "eppRequestBodyMode"
	// EPPRequestBodyModeFullDuplex is FULL_DUPLEX_STREAMED request and
	// response bodies (model.EPPBodyModeFullDuplexStreamed).
	EPPRequestBodyModeFullDuplex = "FullDuplexStreamed"
	// EPPRequestBodyModeStreamed is STREAMED request bodies sent without
	// waiting for the headers response, no response body
	// (model.EPPBodyModeStreamed).
	EPPRequestBodyModeStreamed = "Streamed"
)

// ClassParams is one of our GatewayClasses with its parameters resolved.
type ClassParams struct {
	Class      string
	Generation int64
	Controller string
	// EPPBodyMode is the class's eppRequestBodyMode.
	EPPBodyMode model.EPPBodyMode
	// Problem is why spec.parametersRef does not resolve (the class is
	// Accepted=False/InvalidParameters); "" when it does or is unset.
	Problem string
}

// ResourceName is the class name.
func (c ClassParams) ResourceName() string { return c.Class }

// ResolveClassParams reads gc's spec.parametersRef through configMap (which
// returns nil for a ConfigMap that does not exist). A reference that is not
// a core ConfigMap with a namespace, a missing ConfigMap, a key other than
// EPPRequestBodyModeKey (in data or binaryData: a typo must not pass
// silently) and an unknown value are problems, each message naming the
// ConfigMap and, where there is one, the key.
func ResolveClassParams(gc *gwv1.GatewayClass, configMap func(namespace, name string) *corev1.ConfigMap) ClassParams {
	out := ClassParams{Class: gc.Name, Generation: gc.Generation, Controller: string(gc.Spec.ControllerName)}
	ref := gc.Spec.ParametersRef
	if ref == nil {
		return out
	}
	ns := string(ptr.Deref(ref.Namespace, ""))
	switch {
	case ref.Group != "" || ref.Kind != "ConfigMap":
		out.Problem = fmt.Sprintf("spec.parametersRef %s/%s %s is not supported: it must name a ConfigMap (group \"\", kind ConfigMap)",
			ref.Group, ref.Kind, ref.Name)
		return out
	case ns == "":
		out.Problem = fmt.Sprintf("spec.parametersRef to ConfigMap %s has no namespace; a ConfigMap is namespaced", ref.Name)
		return out
	}
	cm := configMap(ns, ref.Name)
	if cm == nil {
		out.Problem = fmt.Sprintf("ConfigMap %s/%s named by spec.parametersRef does not exist", ns, ref.Name)
		return out
	}
	mode, problem := eppBodyMode(cm)
	if problem != "" {
		out.Problem = fmt.Sprintf("ConfigMap %s/%s: %s", ns, ref.Name, problem)
		return out
	}
	out.EPPBodyMode = mode
	return out
}

// eppBodyMode reads the ConfigMap's keys.
func eppBodyMode(cm *corev1.ConfigMap) (model.EPPBodyMode, string) {
	var keys []string
	for k := range cm.Data {
		keys = append(keys, k)
	}
	for k := range cm.BinaryData {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k != EPPRequestBodyModeKey {
			return "", fmt.Sprintf("key %q is not a GatewayClass parameter (known: %s)", k, EPPRequestBodyModeKey)
		}
	}
	if _, ok := cm.BinaryData[EPPRequestBodyModeKey]; ok {
		return "", fmt.Sprintf("key %s must be in data, not binaryData", EPPRequestBodyModeKey)
	}
	v, ok := cm.Data[EPPRequestBodyModeKey]
	switch {
	case !ok || v == EPPRequestBodyModeFullDuplex:
		return model.EPPBodyModeFullDuplexStreamed, ""
	case v == EPPRequestBodyModeStreamed:
		return model.EPPBodyModeStreamed, ""
	}
	return "", fmt.Sprintf("key %s: %q is not one of %s", EPPRequestBodyModeKey, v,
		strings.Join([]string{EPPRequestBodyModeFullDuplex, EPPRequestBodyModeStreamed}, ", "))
}

// withClassProblem returns st with the Gateway's Accepted condition set to
// False/InvalidParameters naming the class and its problem: a Gateway of a
// class that is not accepted is not accepted either, and the translator
// refuses it (its proxies keep their last configuration). st is not
// modified.
func withClassProblem(st gwv1.GatewayStatus, class, problem string) gwv1.GatewayStatus {
	return withInvalidParameters(st, fmt.Sprintf("GatewayClass %s has invalid parameters (%s)", class, problem))
}

// gatewayParametersProblem is why a Gateway's own parameters
// (spec.infrastructure.parametersRef) cannot be used: none are
// implemented, so any reference is one the controller cannot resolve
// (Gateway API: Accepted=False with reason InvalidParameters). "" without
// a reference.
func gatewayParametersProblem(gw *gwv1.Gateway) string {
	if gw.Spec.Infrastructure == nil || gw.Spec.Infrastructure.ParametersRef == nil {
		return ""
	}
	r := gw.Spec.Infrastructure.ParametersRef
	return fmt.Sprintf("spec.infrastructure.parametersRef %s/%s %s: this controller implements no Gateway parameters", r.Group, r.Kind, r.Name)
}

// withInvalidParameters returns st with the Gateway's Accepted condition
// False/InvalidParameters, its message what is wrong and what follows: a
// class problem (withClassProblem) or the Gateway's own
// (gatewayParametersProblem), both of which make the translator refuse
// the Gateway. st is not modified.
func withInvalidParameters(st gwv1.GatewayStatus, what string) gwv1.GatewayStatus {
	return withNotAccepted(st, gwv1.GatewayReasonInvalidParameters, what)
}

// withNotAccepted returns st with the Gateway's Accepted condition False
// with reason, its message what is wrong and what follows (the translator
// refuses the Gateway). st is not modified.
func withNotAccepted(st gwv1.GatewayStatus, reason gwv1.GatewayConditionReason, what string) gwv1.GatewayStatus {
	out := *st.DeepCopy()
	for i := range out.Conditions {
		if c := &out.Conditions[i]; c.Type == string(gwv1.GatewayConditionAccepted) {
			c.Status = metav1.ConditionFalse
			c.Reason = string(reason)
			c.Message = what + "; the Gateway's proxies keep their last configuration"
		}
	}
	return out
}
