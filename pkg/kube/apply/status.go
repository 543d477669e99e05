// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusClient is the part of a client-go typed client that OwnedStatus uses
// (for example the Gateway API clientset's GatewayV1().Gateways(ns)).
type StatusClient[O Object, AC any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (O, error)
	ApplyStatus(ctx context.Context, ac AC, opts metav1.ApplyOptions) (O, error)
}

// OwnedStatus writes status that infermesh alone writes (our Gateways' and
// GatewayClasses' status) with server-side apply of the status subresource.
// Shared status lists (routes' and InferencePools' status.parents) are not
// for this: see pkg/kube/status.
type OwnedStatus[O Object, AC any] struct {
	// FieldManager is our field manager for the status.
	FieldManager string
	// ExtractStatus is client-go's generated status extractor of the kind
	// (for Gateways gatewayv1ac.ExtractGatewayStatus).
	ExtractStatus func(live O, manager string) (AC, error)
}

// Apply makes the status of namespace/name equal desired (an apply
// configuration carrying name, namespace and only status). It reads the live
// object first and writes nothing when the status fields our manager owns
// already equal desired, so an unchanged status causes no request. It returns
// whether it wrote; a missing object is not an error (there is nothing to
// write to). Conditions must already carry the lastTransitionTime to keep
// (status.KeepTransitionTimes); ApplyFrom computes desired from the live
// object for that.
func (o OwnedStatus[O, AC]) Apply(ctx context.Context, c StatusClient[O, AC], namespace, name string, desired AC) (bool, error) {
	return o.ApplyFrom(ctx, c, namespace, name, func(O) (AC, error) { return desired, nil })
}

// ApplyFrom is Apply with the desired configuration computed by build from
// the live object just read (for example to keep its conditions'
// lastTransitionTime). An error from build is returned, wrapped with the key.
func (o OwnedStatus[O, AC]) ApplyFrom(ctx context.Context, c StatusClient[O, AC], namespace, name string, build func(live O) (AC, error)) (bool, error) {
	key := namespace + "/" + name
	live, err := c.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read %s: %w", key, err)
	}
	desired, err := build(live)
	if err != nil {
		return false, fmt.Errorf("status of %s: %w", key, err)
	}
	current, err := o.ExtractStatus(live, o.FieldManager)
	if err != nil {
		return false, fmt.Errorf("read our status fields of %s: %w", key, err)
	}
	if equality.Semantic.DeepEqual(current, desired) {
		return false, nil
	}
	if _, err := c.ApplyStatus(ctx, desired, metav1.ApplyOptions{FieldManager: o.FieldManager, Force: true}); err != nil {
		return false, fmt.Errorf("apply status of %s: %w", key, err)
	}
	return true, nil
}
