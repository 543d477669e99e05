// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/infermesh/infermesh/pkg/test/kubeapply"
)

const (
	// gatewayClass is the class the suite is told to use (-gateway-class).
	gatewayClass = "gateway-conformance"
	// controllerName is pilot-discovery's default PILOT_GATEWAY_API_CONTROLLER_NAME.
	controllerName = "istio.io/gateway-controller"
	// classParams is the class's parametersRef ConfigMap.
	classParams = "gateway-conformance-params"
)

// createGatewayClass creates the suite's GatewayClass, ours. With
// bodyMode "default" (the default of `make conformance`) the class has no
// parametersRef, so every Gateway gets FULL_DUPLEX_STREAMED both ways, as
// a user following GIE's guides (or an Istio install) gets; lwepp v1.6.2
// works with it. With bodyMode "Streamed" its parametersRef ConfigMap
// selects eppRequestBodyMode: Streamed, which lwepp v1.6.0 needs (it
// answers body chunks before the headers in FULL_DUPLEX_STREAMED,
// kubernetes-sigs/gateway-api-inference-extension#3035;
// architecture/xds.md "EPP request body mode").
func (c *cluster) createGatewayClass(ctx context.Context, bodyMode string) error {
	a, err := kubeapply.New(c.config, fieldManager)
	if err != nil {
		return err
	}
	if bodyMode == bodyModeDefault {
		gc := fmt.Sprintf(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"GatewayClass","metadata":{"name":%q},`+
			`"spec":{"controllerName":%q}}`, gatewayClass, controllerName)
		_, err := a.Apply(ctx, []byte(gc))
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: classParams},
		Data:       map[string]string{"eppRequestBodyMode": bodyMode},
	}
	if _, err := c.client.CoreV1().ConfigMaps(installNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("ConfigMap %s: %w", classParams, err)
	}
	gc := fmt.Sprintf(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"GatewayClass","metadata":{"name":%q},`+
		`"spec":{"controllerName":%q,"parametersRef":{"group":"","kind":"ConfigMap","name":%q,"namespace":%q}}}`,
		gatewayClass, controllerName, classParams, installNamespace)
	_, err = a.Apply(ctx, []byte(gc))
	return err
}
