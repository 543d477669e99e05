// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package kubeenv_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// waitBound bounds every wait for a controller to react. EndpointSlices follow
// a pod change in about 2 s on an idle machine; the latency is a benchmark
// figure, not something this test asserts.
const waitBound = 30 * time.Second

// restartBound bounds the wait for kube-controller-manager to act again after
// the apiserver outage: its informers reconnect with exponential backoff capped
// at 30 s (measured here: 2.7 to 11.7 s after the restart).
const restartBound = 60 * time.Second

// TestEndpointSlicesFollowReadinessAndSurviveRestart drives the real
// EndpointSlice controller through the kubelet stand-in, then kills and
// restarts kube-apiserver and checks that clients and controllers recover.
func TestEndpointSlicesFollowReadinessAndSurviveRestart(t *testing.T) {
	env := kubeenv.Start(t)
	client := kubernetes.NewForConfigOrDie(env.RESTConfig())
	ctx := t.Context()

	const ns, svc = "kubeenv-test", "echo"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": svc},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ips := []string{"10.244.0.13", "10.244.0.14", "10.244.0.15"}
	pods, err := kubeenv.CreateReadyPods(ctx, client, ns, "echo", map[string]string{"app": svc}, 8080, ips...)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		if pod.Spec.NodeName != kubeenv.NodeName {
			t.Fatalf("pod %s bound to %q, want %q", pod.Name, pod.Spec.NodeName, kubeenv.NodeName)
		}
	}

	waitReadyAddresses(t, client, ns, svc, ips, waitBound)

	if _, err := kubeenv.SetPodReady(ctx, client, pods[0], ips[0], false); err != nil {
		t.Fatal(err)
	}
	waitReadyAddresses(t, client, ns, svc, ips[1:], waitBound)

	// The audit log names the writers: the stand-in's status writes under its
	// field manager, and the controller-manager's EndpointSlice writes.
	waitAudit(t, env, "a pods/status update by the kubelet stand-in", func(e kubeenv.AuditEvent) bool {
		return e.User == kubeenv.AdminUser && e.Verb == "update" && e.Resource == "pods" && e.Subresource == "status" &&
			e.Namespace == ns && e.Name == pods[0].Name && e.FieldManager == kubeenv.KubeletFieldManager && e.Code == 200
	})
	waitAudit(t, env, "an EndpointSlice write by kube-controller-manager", func(e kubeenv.AuditEvent) bool {
		return e.User == kubeenv.ControllerManagerUser && e.IsWrite() && e.Resource == "endpointslices" && e.Namespace == ns && e.Code/100 == 2
	})

	// Fault injection: 5 s without an apiserver, etcd's data kept.
	env.StopAPIServer()
	if _, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		t.Fatal("a request succeeded while kube-apiserver was stopped")
	}
	time.Sleep(5 * time.Second) // the outage itself, not a wait for a condition
	env.StartAPIServer()

	got, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("the client does not work after the restart: %v", err)
	}
	if len(got.Items) != len(ips) {
		t.Fatalf("%d pods after the restart, want %d", len(got.Items), len(ips))
	}
	// The controller-manager reconnects too: readiness changes flow again.
	if _, err := kubeenv.MarkPodReady(ctx, client, pods[0], ips[0]); err != nil {
		t.Fatal(err)
	}
	waitReadyAddresses(t, client, ns, svc, ips, restartBound)
}

// waitReadyAddresses waits up to bound until the Service's EndpointSlices list
// exactly want as the addresses of ready endpoints.
func waitReadyAddresses(t *testing.T, client kubernetes.Interface, ns, svc string, want []string, bound time.Duration) {
	t.Helper()
	began := time.Now()
	var last []string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, bound, true, func(ctx context.Context) (bool, error) {
		list, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			return false, nil // the apiserver may be restarting; keep polling
		}
		last = readyAddresses(list.Items)
		return cmp.Equal(last, want), nil
	})
	if err != nil {
		t.Fatalf("EndpointSlices of %s/%s: ready addresses %v after %v, want %v", ns, svc, last, bound, want)
	}
	t.Logf("EndpointSlices of %s/%s show ready %v after %v", ns, svc, want, time.Since(began).Round(time.Millisecond))
}

// readyAddresses returns the sorted addresses of the ready endpoints.
func readyAddresses(eps []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range eps {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				out = append(out, ep.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// waitAudit waits up to waitBound for an audit event matching match.
func waitAudit(t *testing.T, env *kubeenv.Env, what string, match func(kubeenv.AuditEvent) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, waitBound, true, func(context.Context) (bool, error) {
		events, err := env.AuditEvents()
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(events, match), nil
	})
	if err != nil {
		t.Fatalf("audit log: no %s: %v", what, err)
	}
}
