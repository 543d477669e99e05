// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// IsOurGatewayClass reports whether gc is handled by this controller: its
// spec.controllerName (Gateway API GatewayClassSpec.ControllerName) equals
// controller. A nil class is not ours.
func IsOurGatewayClass(gc *gwv1.GatewayClass, controller string) bool {
	return gc != nil && string(gc.Spec.ControllerName) == controller
}

// OurGatewayClassNames returns the names of the classes in classes whose
// spec.controllerName is controller, sorted. A Gateway is ours when its
// spec.gatewayClassName is one of them.
func OurGatewayClassNames(classes []*gwv1.GatewayClass, controller string) []string {
	var out []string
	for _, gc := range classes {
		if IsOurGatewayClass(gc, controller) {
			out = append(out, gc.Name)
		}
	}
	slices.Sort(out)
	return out
}

// GatewayClassAcceptedCondition returns the Accepted condition
// (GatewayClassConditionStatusAccepted) we write on one of our classes:
// True/Accepted, or False/InvalidParameters with problem as the message
// when its spec.parametersRef does not resolve (ResolveClassParams), with
// observedGeneration the class's generation. The caller keeps
// lastTransitionTime of an unchanged condition; now is used otherwise.
func GatewayClassAcceptedCondition(gc *gwv1.GatewayClass, problem string, now metav1.Time) metav1.Condition {
	c := metav1.Condition{
		Type:               string(gwv1.GatewayClassConditionStatusAccepted),
		Status:             metav1.ConditionTrue,
		Reason:             string(gwv1.GatewayClassReasonAccepted),
		Message:            fmt.Sprintf("handled by %s", gc.Spec.ControllerName),
		ObservedGeneration: gc.Generation,
		LastTransitionTime: now,
	}
	if problem != "" {
		c.Status = metav1.ConditionFalse
		c.Reason = string(gwv1.GatewayClassReasonInvalidParameters)
		c.Message = problem
	}
	return c
}
