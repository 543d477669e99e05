// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/infermesh/infermesh/pkg/test/poll"
)

// TestNode runs every scenario against one cluster and node (a cluster
// start costs about 3 s of the 2 cores); each subtest has its namespace.
func TestNode(t *testing.T) {
	c := startCluster(t)
	t.Run("NodeAndLease", c.testNodeAndLease)
	t.Run("TwoContainersShareAnAddress", c.testSharedAddress)
	t.Run("Environment", c.testEnvironment)
	t.Run("Volumes", c.testVolumes)
	t.Run("SecretCreatedAfterPod", c.testLateSecret)
	t.Run("ClusterDNS", c.testClusterDNS)
	t.Run("Probes", c.testProbes)
	t.Run("CrashAndRestartPolicy", c.testRestarts)
	t.Run("DeletionWithinGracePeriod", c.testDeletion)
	t.Run("UnknownImage", c.testUnknownImage)
	t.Run("LogsThroughTheAPIServer", c.testLogs)
}

// testLogs reads a container's output as `kubectl logs` does: pods/log on
// the API server, which proxies to the node's kubelet API with its client
// certificate. Both streams, sinceTime (second precision on the wire, as
// the suite's mirror tests send it), tailLines, timestamps, limitBytes and
// follow; an unknown container is an error.
func (c *cluster) testLogs(t *testing.T) {
	ns := c.namespace(t, "logs")
	c.create(t, appPod(ns, "talker", appContainer("app", 8080)))
	p := c.waitPod(t, ns, "talker", "Ready", waitBound, isReady)
	say := func(text string, stderr bool) {
		t.Helper()
		u := fmt.Sprintf("http://%s:8080/say?text=%s", p.Status.PodIP, text)
		if stderr {
			u += "&stderr=1"
		}
		if _, err := tryGet(u); err != nil {
			t.Fatal(err)
		}
	}
	logs := func(opts *corev1.PodLogOptions) (string, error) {
		b, err := c.client.CoreV1().Pods(ns).GetLogs("talker", opts).DoRaw(context.Background())
		return string(b), err
	}
	say("before", false)
	say("on-stderr", true)
	poll.Until(t, waitBound, "the lines reach the log", func() bool {
		out, err := logs(&corev1.PodLogOptions{Container: "app"})
		return err == nil && strings.Contains(out, "before\n") && strings.Contains(out, "on-stderr\n")
	})
	time.Sleep(1100 * time.Millisecond) // sinceTime has second precision
	mark := metav1.Now()
	time.Sleep(1100 * time.Millisecond)
	say("after", false)
	poll.Until(t, waitBound, "the last line reaches the log", func() bool {
		out, err := logs(&corev1.PodLogOptions{Container: "app"})
		return err == nil && strings.Contains(out, "after\n")
	})

	out, err := logs(&corev1.PodLogOptions{Container: "app", SinceTime: &mark})
	if err != nil || out != "after\n" {
		t.Errorf("sinceTime: %q, %v; want only the line written after it", out, err)
	}
	if out, err := logs(&corev1.PodLogOptions{Container: "app", TailLines: ptr.To[int64](1)}); err != nil || out != "after\n" {
		t.Errorf("tailLines 1: %q, %v; want the last line", out, err)
	}
	if out, err := logs(&corev1.PodLogOptions{Container: "app", LimitBytes: ptr.To[int64](4), SinceTime: &mark}); err != nil || out != "afte" {
		t.Errorf("limitBytes 4: %q, %v; want 4 bytes", out, err)
	}
	out, err = logs(&corev1.PodLogOptions{Container: "app", Timestamps: true, SinceTime: &mark})
	ts, text, _ := strings.Cut(strings.TrimSuffix(out, "\n"), " ")
	if at, perr := time.Parse(time.RFC3339Nano, ts); err != nil || perr != nil || text != "after" || at.Before(mark.Time) {
		t.Errorf("timestamps: %q, %v; want <RFC 3339 time after the mark> after", out, err)
	}
	if _, err := logs(&corev1.PodLogOptions{Container: "nope"}); err == nil {
		t.Error("logs of a container the pod does not have: no error")
	}

	// follow: the stream stays open and carries a line written later.
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	stream, err := c.client.CoreV1().Pods(ns).GetLogs("talker", &corev1.PodLogOptions{Container: "app", Follow: true, SinceTime: &mark}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(stream)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if got := <-lines; got != "after" {
		t.Fatalf("follow: first line %q, want after", got)
	}
	say("followed", false)
	select {
	case got := <-lines:
		if got != "followed" {
			t.Errorf("follow: next line %q, want followed", got)
		}
	case <-ctx.Done():
		t.Error("follow: the line written later never came")
	}
}

func (c *cluster) testNodeAndLease(t *testing.T) {
	ctx := context.Background()
	poll.Until(t, waitBound, "Node Ready with its Lease", func() bool {
		n, err := c.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil || len(n.Status.Conditions) == 0 || n.Spec.PodCIDR != podCIDR {
			return false
		}
		l, err := c.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == nodeName
	})
}

func (c *cluster) testSharedAddress(t *testing.T) {
	ns := c.namespace(t, "shared")
	c.create(t, appPod(ns, "two", appContainer("a", 8080), appContainer("b", 8081)))
	p := c.waitPod(t, ns, "two", "Running and Ready", waitBound, isReady)
	ip := p.Status.PodIP
	if !strings.HasPrefix(ip, "10.244.64.") || len(p.Status.PodIPs) != 1 || p.Status.PodIPs[0].IP != ip {
		t.Fatalf("podIP %q podIPs %v: want one address in %s", ip, p.Status.PodIPs, podCIDR)
	}
	if p.Status.HostIP != "10.244.64.1" || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("hostIP %q phase %s: want 10.244.64.1, Running", p.Status.HostIP, p.Status.Phase)
	}
	for _, cond := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if condition(p, cond) != corev1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", cond, condition(p, cond))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready || cs.Started == nil || !*cs.Started || cs.State.Running == nil || cs.RestartCount != 0 {
			t.Errorf("container %s: %+v: want ready, started, running, no restarts", cs.Name, cs)
		}
	}
	// Both containers listen on the pod address; each reaches the other
	// over the pod's loopback, which only a shared namespace gives.
	httpGet(t, fmt.Sprintf("http://%s:8080/healthz", ip))
	httpGet(t, fmt.Sprintf("http://%s:8081/healthz", ip))
	inner := url.QueryEscape("http://127.0.0.1:8081/env")
	var env map[string]string
	if err := json.Unmarshal([]byte(httpGet(t, fmt.Sprintf("http://%s:8080/fetch?url=%s", ip, inner))), &env); err != nil {
		t.Fatal(err)
	}
	if env["HTTP_PORT"] != "8081" {
		t.Fatalf("container a fetched 127.0.0.1:8081 and got HTTP_PORT=%q, want container b's 8081", env["HTTP_PORT"])
	}
	// The host's loopback does not have them.
	if _, err := tryGet("http://127.0.0.1:8080/healthz"); err == nil {
		t.Fatal("the pod's port answers on the host's loopback: the container is not in its own namespace")
	}
}

func (c *cluster) testEnvironment(t *testing.T) {
	ctx := context.Background()
	ns := c.namespace(t, "env")
	_, err := c.client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foo-svc"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromInt32(8000)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.client.CoreV1().Services(ns).Get(ctx, "foo-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := c.client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kubeenv turns the ServiceAccount admission plugin off, so the pod
	// names no account unless it says so; the node then uses "default".
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	ctr := appContainer("app", 8080,
		field("POD_NAME", "metadata.name"), field("NAMESPACE", "metadata.namespace"), field("POD_UID", "metadata.uid"),
		field("POD_IP", "status.podIP"), field("HOST_IP", "status.hostIP"), field("NODE", "spec.nodeName"),
		field("SA", "spec.serviceAccountName"),
		corev1.EnvVar{Name: "GREETING", Value: "hello $(POD_NAME) at $(FOO_SVC_SERVICE_HOST), $$(POD_NAME) $(UNDEFINED)"},
	)
	ctr.Command = []string{"/app"}
	ctr.Args = []string{"--pod=$(POD_NAME)", "--ip=$(POD_IP)"}
	created := c.create(t, appPod(ns, "downward", ctr))
	p := c.waitPod(t, ns, "downward", "Ready", waitBound, isReady)
	base := fmt.Sprintf("http://%s:8080", p.Status.PodIP)
	var env map[string]string
	if err := json.Unmarshal([]byte(httpGet(t, base+"/env")), &env); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"POD_NAME": "downward", "NAMESPACE": ns, "POD_UID": string(created.UID),
		"POD_IP": p.Status.PodIP, "HOST_IP": "10.244.64.1", "NODE": nodeName, "SA": created.Spec.ServiceAccountName,
		"GREETING":                   fmt.Sprintf("hello downward at %s, $(POD_NAME) $(UNDEFINED)", svc.Spec.ClusterIP),
		"FOO_SVC_SERVICE_HOST":       svc.Spec.ClusterIP,
		"FOO_SVC_SERVICE_PORT":       "8000",
		"FOO_SVC_SERVICE_PORT_HTTP":  "8000",
		"FOO_SVC_PORT":               "tcp://" + svc.Spec.ClusterIP + ":8000",
		"FOO_SVC_PORT_8000_TCP_ADDR": svc.Spec.ClusterIP,
		"KUBERNETES_SERVICE_HOST":    kube.Spec.ClusterIP,
		"KUBERNETES_SERVICE_PORT":    fmt.Sprint(kube.Spec.Ports[0].Port),
		"HOSTNAME":                   "downward",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if args := httpGet(t, base+"/args"); strings.TrimSpace(args) != fmt.Sprintf(`["--pod=downward","--ip=%s"]`, p.Status.PodIP) {
		t.Errorf("args %s: want $(VAR) expanded", args)
	}
	if who := httpGet(t, base+"/whoami"); who != "system:serviceaccount:"+ns+":default" {
		t.Errorf("the pod reached the API server as %q, want its ServiceAccount", who)
	}
	if _, err := os.Stat(env["KUBECONFIG"]); err != nil {
		t.Errorf("KUBECONFIG %q: %v", env["KUBECONFIG"], err)
	}

	// enableServiceLinks: false keeps only the kubernetes Service's variables.
	off := appContainer("app", 8080)
	pod := appPod(ns, "nolinks", off)
	pod.Spec.EnableServiceLinks = ptr.To(false)
	c.create(t, pod)
	p = c.waitPod(t, ns, "nolinks", "Ready", waitBound, isReady)
	env = nil
	if err := json.Unmarshal([]byte(httpGet(t, fmt.Sprintf("http://%s:8080/env", p.Status.PodIP))), &env); err != nil {
		t.Fatal(err)
	}
	if _, ok := env["FOO_SVC_SERVICE_HOST"]; ok || env["KUBERNETES_SERVICE_HOST"] != kube.Spec.ClusterIP {
		t.Errorf("enableServiceLinks=false: FOO_SVC_SERVICE_HOST present=%v, KUBERNETES_SERVICE_HOST=%q", ok, env["KUBERNETES_SERVICE_HOST"])
	}
}

// probeCase is one probe kind against the app: the probe handler and the
// env that makes the app serve it.
type probeCase struct {
	kind    string
	handler corev1.ProbeHandler
	env     []corev1.EnvVar
}

func (c *cluster) testProbes(t *testing.T) {
	ns := c.namespace(t, "probes")
	cases := []probeCase{
		{"http", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}, nil},
		{"tcp", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9000)}}, []corev1.EnvVar{{Name: "TCP_PORT", Value: "9000"}}},
		{"grpc", corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9001, Service: ptr.To(grpcService)}}, []corev1.EnvVar{{Name: "GRPC_PORT", Value: "9001"}}},
	}
	for _, pc := range cases {
		t.Run(pc.kind, func(t *testing.T) { c.probeCase(t, ns, pc) })
	}
	t.Run("NeverPassing", func(t *testing.T) { c.probeNeverPasses(t, ns) })
}

// probeCase: the readiness probe (initialDelaySeconds 2) makes the pod
// Ready; once the app fails every probe, readiness (failureThreshold 1)
// flips Ready to False, then liveness (failureThreshold 4) kills the
// container, restartCount becomes 1, and the fresh process is Ready again.
func (c *cluster) probeCase(t *testing.T, ns string, pc probeCase) {
	ctr := appContainer("app", 8080, pc.env...)
	ctr.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	ctr.ReadinessProbe = &corev1.Probe{ProbeHandler: pc.handler, InitialDelaySeconds: 2, PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	ctr.LivenessProbe = &corev1.Probe{ProbeHandler: pc.handler, PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 4}
	name := "probe-" + pc.kind
	c.create(t, appPod(ns, name, ctr))
	p := c.waitPod(t, ns, name, "Ready", waitBound, isReady)
	cs := p.Status.ContainerStatuses[0]
	readyAt := readyTransition(p)
	if d := readyAt.Sub(cs.State.Running.StartedAt.Time); d < 2*time.Second-time.Second {
		// Times are in whole seconds; the probe runs no earlier than 2 s after the start.
		t.Errorf("Ready %v after the container started, before initialDelaySeconds 2", d)
	}
	httpGet(t, fmt.Sprintf("http://%s:8080/unhealthy", p.Status.PodIP))
	c.waitPod(t, ns, name, "Ready=False after the readiness probe fails", waitBound, func(p *corev1.Pod) bool {
		return !isReady(p) && p.Status.ContainerStatuses[0].RestartCount == 0
	})
	p = c.waitPod(t, ns, name, "restarted by the liveness probe, then Ready", waitBound, func(p *corev1.Pod) bool {
		return isReady(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	// The app exits 0 on SIGTERM, so the killed run ends Completed.
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 0 || last.Reason != "Completed" {
		t.Errorf("lastState after a liveness kill = %+v, want terminated, Completed (the app exits 0 on SIGTERM)", last)
	}
	if log, err := os.ReadFile(c.node.LogPath(p, "app", 0)); err != nil || !strings.Contains(string(log), "got SIGTERM") {
		t.Errorf("the first run's log (%v) lacks the SIGTERM of the liveness kill:\n%s", err, log)
	}
}

// probeNeverPasses: a readiness probe on a port nothing listens on keeps
// the pod Running but not Ready.
func (c *cluster) probeNeverPasses(t *testing.T, ns string) {
	ctr := appContainer("app", 8080)
	ctr.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9999)}}, PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	c.create(t, appPod(ns, "never", ctr))
	c.waitPod(t, ns, "never", "Running", waitBound, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	time.Sleep(3 * time.Second) // three probe periods
	p := c.waitPod(t, ns, "never", "still Running", waitBound, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if isReady(p) || p.Status.ContainerStatuses[0].Ready {
		t.Fatalf("a pod whose readiness probe never passes is Ready: %s", describe(p))
	}
}

func readyTransition(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func (c *cluster) testRestarts(t *testing.T) {
	ns := c.namespace(t, "restarts")
	crash := []corev1.EnvVar{{Name: "EXIT_AFTER", Value: "300ms"}, {Name: "EXIT_CODE", Value: "3"}}
	c.create(t, appPod(ns, "always", appContainer("app", 8080, crash...)))
	p := c.waitPod(t, ns, "always", "restarted twice", waitBound, func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 3 || last.Reason != "Error" {
		t.Errorf("lastState = %+v, want terminated, exit code 3, reason Error", last)
	}
	c.waitPod(t, ns, "always", "in CrashLoopBackOff", waitBound, func(p *corev1.Pod) bool {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CrashLoopBackOff" && p.Status.Phase == corev1.PodRunning
	})

	never := appPod(ns, "never", appContainer("app", 8080, crash...))
	never.Spec.RestartPolicy = corev1.RestartPolicyNever
	c.create(t, never)
	p = c.waitPod(t, ns, "never", "Failed", waitBound, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 0 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 3 {
		t.Errorf("restartPolicy Never: %+v, want terminated with exit code 3, no restart", cs)
	}

	ok := appPod(ns, "onfailure", appContainer("app", 8080, corev1.EnvVar{Name: "EXIT_AFTER", Value: "300ms"}, corev1.EnvVar{Name: "EXIT_CODE", Value: "0"}))
	ok.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	c.create(t, ok)
	p = c.waitPod(t, ns, "onfailure", "Succeeded", waitBound, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 0 || cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" {
		t.Errorf("restartPolicy OnFailure, exit 0: %+v, want Completed, no restart", cs)
	}
}

// testDeletion: a process that exits on SIGTERM is gone at once; one that
// ignores SIGTERM is killed when the grace period ends; both pods leave
// the API by the end of their grace period (plus the status round trip).
func (c *cluster) testDeletion(t *testing.T) {
	ns := c.namespace(t, "deletion")
	for _, tc := range []struct {
		name     string
		env      []corev1.EnvVar
		grace    int64
		stopped  time.Duration // when the port must be closed by
		killedBy string
	}{
		{"polite", nil, 6, 2 * time.Second, "SIGTERM"},
		{"stubborn", []corev1.EnvVar{{Name: "IGNORE_SIGTERM", Value: "1"}}, 3, 3*time.Second + 2*time.Second, "SIGKILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := appPod(ns, tc.name, appContainer("app", 8080, tc.env...))
			pod.Spec.TerminationGracePeriodSeconds = ptr.To(tc.grace)
			created := c.create(t, pod)
			p := c.waitPod(t, ns, tc.name, "Ready", waitBound, isReady)
			url := fmt.Sprintf("http://%s:8080/healthz", p.Status.PodIP)
			began := time.Now()
			if err := c.client.CoreV1().Pods(ns).Delete(context.Background(), tc.name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, tc.stopped, "the process stops", func() bool { _, err := tryGet(url); return err != nil })
			stopped := time.Since(began)
			if tc.killedBy == "SIGKILL" && stopped < time.Duration(tc.grace)*time.Second-500*time.Millisecond {
				t.Errorf("a process ignoring SIGTERM stopped after %v, before the grace period of %ds", stopped, tc.grace)
			}
			poll.Until(t, time.Duration(tc.grace)*time.Second+5*time.Second, "the pod leaves the API", func() bool {
				_, err := c.client.CoreV1().Pods(ns).Get(context.Background(), tc.name, metav1.GetOptions{})
				return err != nil
			})
			log, err := os.ReadFile(c.node.LogPath(created, "app", 0))
			if err != nil || !strings.Contains(string(log), "got SIGTERM") {
				t.Errorf("container log %v lacks the SIGTERM the process got:\n%s", err, log)
			}
		})
	}
}

func (c *cluster) testUnknownImage(t *testing.T) {
	ctx := context.Background()
	ns := c.namespace(t, "unknown")
	const image = "example.com/nowhere/missing:v9"
	pod := appPod(ns, "missing", corev1.Container{Name: "app", Image: image})
	c.create(t, pod)
	p := c.waitPod(t, ns, "missing", "waiting with ErrImagePull", waitBound, func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ErrImagePull"
	})
	if p.Status.Phase != corev1.PodPending || isReady(p) {
		t.Fatalf("pod with an unknown image: %s, want Pending and not Ready", describe(p))
	}
	poll.Until(t, waitBound, "a Warning event naming the image", func() bool {
		evs, err := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=missing"})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "ErrImagePull" && strings.Contains(e.Message, image) {
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second)
	if p, _ = c.client.CoreV1().Pods(ns).Get(ctx, "missing", metav1.GetOptions{}); p.Status.Phase != corev1.PodPending {
		t.Fatalf("pod with an unknown image left Pending: %s", describe(p))
	}
}
