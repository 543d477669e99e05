// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/infermesh/infermesh/pkg/test/poll"
)

// echoImage is the suite's model-server image (base.yaml).
const echoImage = "gcr.io/k8s-staging-gateway-api/echo-basic:v20251106-v1.3.0-263-g47c3435c"

// TestClusterSmoke checks the cluster alone: a Deployment of echo-basic,
// with no nodeName, is scheduled by kube-scheduler onto the node, runs,
// becomes Ready and answers from its pod address.
func TestClusterSmoke(t *testing.T) {
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	images, err := readImages(filepath.Join(cfg.images, "images.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, gieCluster, cfg.suite, images, filepath.Join(cfg.state, "smoke"))
	ctx := context.Background()
	labels := map[string]string{"app": "echo"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "echo", Image: echoImage,
					Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(3000)}},
						PeriodSeconds: 1,
					},
				}}},
			},
		},
	}
	if _, err := c.client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	poll.UntilOr(t, 120*time.Second, "an echo pod Ready on "+nodeName, func() bool {
		pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		pod = pods.Items[0]
		return pod.Spec.NodeName == nodeName && podReady(&pod)
	}, func() string {
		return fmt.Sprintf("pod %s node %q status %+v", pod.Name, pod.Spec.NodeName, pod.Status)
	})
	resp, err := http.Get("http://" + pod.Status.PodIP + ":3000/smoke")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /smoke: %s %s", resp.Status, body)
	}
	t.Logf("echo-basic on %s (%s) answered: %s", pod.Name, pod.Status.PodIP, body)
	c.checkLoadBalancer(t, ctx, pod.Name)
}

// checkLoadBalancer puts a LoadBalancer Service (port 80 to the pod's 3000)
// in front of the echo pod, waits for the stand-in to give it an address,
// and reaches the pod through that address.
func (c *cluster) checkLoadBalancer(t *testing.T, ctx context.Context, podName string) {
	lb, err := startLoadBalancer(ctx, c.client, c.bridge, gieCluster.lbCIDR, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.stop)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(3000)}},
		},
	}
	if _, err := c.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var body string
	poll.UntilOr(t, 60*time.Second, "echo reached through its LoadBalancer address", func() bool {
		s, err := c.client.CoreV1().Services("default").Get(ctx, "echo", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) != 1 {
			return false
		}
		addr := s.Status.LoadBalancer.Ingress[0].IP
		if !gieCluster.lbCIDR.Contains(netip.MustParseAddr(addr)) {
			t.Fatalf("LoadBalancer address %s is not in %s", addr, gieCluster.lbCIDR)
		}
		resp, err := http.Get("http://" + addr + "/through-lb")
		if err != nil {
			body = err.Error()
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	}, func() string { return body })
	if !strings.Contains(body, `"pod": "`+podName+`"`) || !strings.Contains(body, `"path": "/through-lb"`) {
		t.Fatalf("through the load balancer: %s; want pod %s, path /through-lb", body, podName)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
