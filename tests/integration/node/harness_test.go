// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package node_test runs pkg/test/node against a real API server
// (pkg/test/kubeenv): pods bound to the node by spec.nodeName run as
// processes of this test binary, which turns into the container program
// when its image ENV says so (app_test.go). It needs root and iproute2, and
// fails (never skips) without them.
package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/infermesh/infermesh/pkg/test/clusterdns"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/node"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

// podCIDR is this package's pod network: 10.244.64.0/24, which no other
// integration package uses (they use 10.244.0.x, 10.244.30.x, 10.244.31.x).
const podCIDR = "10.244.64.0/24"

const (
	nodeName = "nodetest"
	appImage = "example.com/nodetest/app:v1"
	// waitBound bounds each wait for the node to act on a pod.
	waitBound = 30 * time.Second
)

func TestMain(m *testing.M) {
	if os.Getenv("NODETEST_APP") == "1" {
		runApp()
		return
	}
	os.Exit(m.Run())
}

// cluster is one API server with the node agent and the cluster DNS.
type cluster struct {
	client kubernetes.Interface
	node   *node.Node
	// dnsAddr is the cluster DNS address, the node's --cluster-dns.
	dnsAddr netip.Addr
}

// startCluster starts kubeenv and the node; both stop at the test's end.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	env := kubeenv.Start(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := env.RESTConfig()
	client := kubernetes.NewForConfigOrDie(cfg)
	state := t.TempDir()
	// The cluster DNS serves on the bridge address (the Node's InternalIP),
	// which the pods reach through their default route.
	dnsAddr := netip.MustParsePrefix(podCIDR).Addr().Next()
	n, err := node.Start(context.Background(), node.Config{
		Client: client, RESTConfig: cfg, NodeName: nodeName,
		PodCIDR:  netip.MustParsePrefix(podCIDR),
		Images:   map[string]node.Image{appImage: {Binary: self, Entrypoint: "/app", Env: []string{appSwitch}}},
		StateDir: state, InitialBackOff: time.Second, MaxBackOff: 2 * time.Second,
		ClusterDNS: []netip.Addr{dnsAddr}, KubeletClientCA: env.KubeletClientCA(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// No upstream: names outside cluster.local are REFUSED, so the test
	// depends on no DNS outside this machine.
	dns, err := clusterdns.Start(context.Background(), clusterdns.Config{Client: client, Addr: netip.AddrPortFrom(dnsAddr, 53).String()})
	if err != nil {
		_ = n.Stop()
		t.Fatal(err)
	}
	t.Cleanup(dns.Stop)
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			dumpLogs(t, state)
		}
	})
	return &cluster{client: client, node: n, dnsAddr: dnsAddr}
}

// dumpLogs logs every container log and virtual-kubelet's log.
func dumpLogs(t *testing.T, dir string) {
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		b, _ := os.ReadFile(path)
		if len(b) > 8000 {
			b = b[len(b)-8000:]
		}
		t.Logf("==> %s <==\n%s", path, b)
		return nil
	})
}

// namespace creates a namespace for one subtest.
func (c *cluster) namespace(t *testing.T, name string) string {
	t.Helper()
	_, err := c.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// create creates pod, bound to the node by spec.nodeName.
func (c *cluster) create(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	pod.Spec.NodeName = nodeName
	out, err := c.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitPod polls the pod until cond holds, failing with the last status seen.
func (c *cluster) waitPod(t *testing.T, ns, name, what string, within time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	poll.UntilOr(t, within, fmt.Sprintf("pod %s/%s: %s", ns, name, what), func() bool {
		p, err := c.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = p
		return cond(p)
	}, func() string { return describe(last) })
	return last
}

func describe(p *corev1.Pod) string {
	if p == nil {
		return "no pod seen"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s podIP=%s", p.Status.Phase, p.Status.PodIP)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, " [%s ready=%v restarts=%d state=%+v last=%+v]", cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
	}
	return b.String()
}

func isReady(p *corev1.Pod) bool { return condition(p, corev1.PodReady) == corev1.ConditionTrue }

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// httpGet fetches url from the host and returns the body; errors fail the test.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	body, err := tryGet(url)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func tryGet(url string) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), nil
}

// appContainer is the test program as a container serving HTTP on port,
// with a readiness probe on /healthz so that Ready means serving (a
// container without one is ready as soon as its process starts, before it
// listens, as with a real kubelet).
func appContainer(name string, port int, env ...corev1.EnvVar) corev1.Container {
	return corev1.Container{
		Name:  name,
		Image: appImage,
		Env:   append([]corev1.EnvVar{{Name: "HTTP_PORT", Value: fmt.Sprint(port)}}, env...),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(port))}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
		},
	}
}

func appPod(ns, name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}
