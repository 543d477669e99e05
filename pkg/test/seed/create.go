// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package seed

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// Create creates the seed's objects through the API server of cfg, in
// order: the namespaces Namespace and GatewayNamespace, the EPP Service,
// the InferencePool, the HTTPRoute and the Gateway. Pods, EndpointSlices and
// the GatewayClass are left to the caller. The first failed create is
// returned, naming the object.
func Create(ctx context.Context, cfg *rest.Config) error {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gc, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ic, err := inferenceclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, ns := range []string{Namespace, GatewayNamespace} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("seed: create namespace %s: %w", ns, err)
		}
	}
	if _, err := kc.CoreV1().Services(Namespace).Create(ctx, EPPService(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("seed: create the EPP Service: %w", err)
	}
	if _, err := ic.InferenceV1().InferencePools(Namespace).Create(ctx, InferencePool(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("seed: create the InferencePool: %w", err)
	}
	if _, err := gc.GatewayV1().HTTPRoutes(Namespace).Create(ctx, HTTPRoute(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("seed: create the HTTPRoute: %w", err)
	}
	if _, err := gc.GatewayV1().Gateways(GatewayNamespace).Create(ctx, Gateway(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("seed: create the Gateway: %w", err)
	}
	return nil
}
