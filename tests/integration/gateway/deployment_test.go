// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// deployedObjects reads the ServiceAccount, Service, ConfigMap and
// Deployment of Gateway gw (class istio); missing ones are nil.
func deployedObjects(t *testing.T, c clients, gw string) []metav1.Object {
	t.Helper()
	ctx, ns := t.Context(), seed.GatewayNamespace
	name := gateway.DeploymentName(gw, seed.GatewayClass)
	get := func(o metav1.Object, err error) metav1.Object {
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	return []metav1.Object{
		get(c.kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})),
		get(c.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})),
		get(c.kube.CoreV1().ConfigMaps(ns).Get(ctx, gateway.BootstrapConfigMapName(gw, seed.GatewayClass), metav1.GetOptions{})),
		get(c.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})),
	}
}

func isNil(o metav1.Object) bool {
	switch v := o.(type) {
	case *corev1.ServiceAccount:
		return v == nil
	case *corev1.Service:
		return v == nil
	case *corev1.ConfigMap:
		return v == nil
	case *appsv1.Deployment:
		return v == nil
	}
	return o == nil
}

func (c clients) gatewayObj(t *testing.T, name string) *gwv1.Gateway {
	t.Helper()
	g, err := c.gateway.GatewayV1().Gateways(seed.GatewayNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Gateway deployments: a Gateway of ours gets its ServiceAccount, Service,
// bootstrap ConfigMap and Deployment, applied with owner references; its
// status follows the Service's load balancer address; a foreign Deployment
// of a deployment's name is left alone; deleting the Gateway lets the
// garbage collector remove what was deployed.
func TestGatewayDeployment(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	c := newClients(env)
	ctx := t.Context()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startController(t, env, map[string]string{
		"PILOT_GATEWAY_XDS_CA_FILE": ca, "PILOT_GATEWAY_XDS_SERVICEACCOUNT_AUTH": "true",
	})
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: seed.GatewayNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Someone else's Deployment holds the name of Gateway "other"'s.
	foreignName := gateway.DeploymentName("other", seed.GatewayClass)
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.GatewayNamespace, Name: foreignName, Labels: map[string]string{"team": "theirs"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "theirs"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/theirs:1"}}},
			},
		},
	}
	foreign, err := c.kube.AppsV1().Deployments(seed.GatewayNamespace).Create(ctx, foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := seed.Gateway()
	other.Name = "other"
	for _, g := range []*gwv1.Gateway{seed.Gateway(), other} {
		if _, err := c.gateway.GatewayV1().Gateways(seed.GatewayNamespace).Create(ctx, g, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	gw := c.gatewayObj(t, seed.GatewayName)
	poll.UntilOr(t, wait, "the four objects of the Gateway", func() bool {
		for _, o := range deployedObjects(t, c, seed.GatewayName) {
			if isNil(o) {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("%v", deployedObjects(t, c, seed.GatewayName)) })
	for _, o := range deployedObjects(t, c, seed.GatewayName) {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != gw.UID || refs[0].Kind != "Gateway" || !ptr.Deref(refs[0].Controller, false) {
			t.Errorf("%T %s: owner references %+v, want the Gateway (uid %s) as controller", o, o.GetName(), refs, gw.UID)
		}
		if o.GetLabels()[gateway.ManagedLabel] == "" || o.GetLabels()[gateway.GatewayNameLabel] != seed.GatewayName {
			t.Errorf("%T %s: labels %v", o, o.GetName(), o.GetLabels())
		}
	}
	objs := deployedObjects(t, c, seed.GatewayName)
	svc := objs[1].(*corev1.Service)
	if svc.Name != "gateway-istio" || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Ports) != 2 ||
		svc.Spec.Ports[1].Port != 80 || svc.Spec.Selector[gateway.GatewayNameLabel] != seed.GatewayName {
		t.Errorf("Service %s: %+v", svc.Name, svc.Spec)
	}
	cm := objs[2].(*corev1.ConfigMap)
	for _, want := range []string{`"GATEWAY_NAME": "gateway"`, `"GATEWAY_NAMESPACE": "gateway-namespace"`, "MIIB", "envoy.grpc_credentials.file_based_metadata"} {
		if !strings.Contains(cm.Data[gateway.BootstrapKey], want) {
			t.Errorf("bootstrap lacks %s:\n%s", want, cm.Data[gateway.BootstrapKey])
		}
	}
	dep := objs[3].(*appsv1.Deployment)
	if sa := dep.Spec.Template.Spec.ServiceAccountName; sa != "gateway-istio" {
		t.Errorf("Deployment's ServiceAccount %q", sa)
	}
	// The proxy's ADS token is issued for our audience alone (what the
	// TokenReview of --xds-auth=serviceaccount asks for), not the API
	// server's.
	var audiences []string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				audiences = append(audiences, src.ServiceAccountToken.Audience)
			}
		}
	}
	if len(audiences) != 1 || audiences[0] != "infermesh" {
		t.Errorf("projected token audiences %q, want one: infermesh", audiences)
	}

	programmed := func(name string) string {
		g := c.gatewayObj(t, name)
		return conditions(g.Status.Conditions)
	}
	poll.UntilOr(t, wait, "Programmed=False while the load balancer is pending", func() bool {
		return programmed(seed.GatewayName) == "Accepted=True (Accepted); Programmed=False (AddressNotAssigned)"
	}, func() string { return programmed(seed.GatewayName) })

	t.Run("the Service's address reaches the Gateway's status", func(t *testing.T) {
		s, err := c.kube.CoreV1().Services(seed.GatewayNamespace).Get(ctx, "gateway-istio", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
		if _, err := c.kube.CoreV1().Services(seed.GatewayNamespace).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.UntilOr(t, wait, "Programmed=True with the address", func() bool {
			g := c.gatewayObj(t, seed.GatewayName)
			return conditions(g.Status.Conditions) == "Accepted=True (Accepted); Programmed=True (Programmed)" &&
				len(g.Status.Addresses) == 1 && g.Status.Addresses[0].Value == "203.0.113.7" &&
				ptr.Deref(g.Status.Addresses[0].Type, "") == gwv1.IPAddressType &&
				strings.HasSuffix(conditions(g.Status.Listeners[0].Conditions), "Programmed=True (Programmed)")
		}, func() string { return fmt.Sprintf("%+v", c.gatewayObj(t, seed.GatewayName).Status) })
	})

	t.Run("a foreign Deployment of the name is left alone", func(t *testing.T) {
		o := c.gatewayObj(t, "other")
		poll.Until(t, wait, "a DeploymentNameTaken event on Gateway other", func() bool {
			evs, err := c.kube.CoreV1().Events(seed.GatewayNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Reason == "DeploymentNameTaken" && e.InvolvedObject.Kind == "Gateway" && e.InvolvedObject.UID == o.UID &&
					e.Type == corev1.EventTypeWarning {
					return true
				}
			}
			return false
		})
		now, err := c.kube.AppsV1().Deployments(seed.GatewayNamespace).Get(ctx, foreignName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if now.ResourceVersion != foreign.ResourceVersion || len(now.OwnerReferences) != 0 {
			t.Errorf("someone else's Deployment was written: resourceVersion %s -> %s, owners %v",
				foreign.ResourceVersion, now.ResourceVersion, now.OwnerReferences)
		}
		// The objects whose names are free are still made.
		if objs := deployedObjects(t, c, "other"); isNil(objs[0]) || isNil(objs[1]) || isNil(objs[2]) {
			t.Errorf("Gateway other's ServiceAccount, Service and ConfigMap: %v", objs[:3])
		}
	})

	t.Run("Gateway deleted: the garbage collector removes its objects", func(t *testing.T) {
		if err := c.gateway.GatewayV1().Gateways(seed.GatewayNamespace).Delete(ctx, seed.GatewayName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.UntilOr(t, wait, "the four objects gone", func() bool {
			for _, o := range deployedObjects(t, c, seed.GatewayName) {
				if !isNil(o) {
					return false
				}
			}
			return true
		}, func() string { return fmt.Sprintf("%v", deployedObjects(t, c, seed.GatewayName)) })
	})
}
