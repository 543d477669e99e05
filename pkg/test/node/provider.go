// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// provider is the process side of the node: virtual-kubelet's
// PodLifecycleHandler and PodNotifier. virtual-kubelet's PodController
// watches the pods bound to the node, calls CreatePod, UpdatePod and
// DeletePod, and writes the statuses reported through NotifyPods; the
// provider runs each pod's containers as processes in the pod's sandbox.
type provider struct {
	cfg       Config
	ip        ipTool
	bridge    *bridge
	ipam      *ipam
	forwarder *apiForwarder
	// kubeletAPI serves container logs to the API server (nil when
	// Config.KubeletClientCA is unset).
	kubeletAPI *kubeletAPI
	env        envSources
	recorder   record.EventRecorder

	mu     sync.Mutex
	pods   map[string]*podRuntime // by namespace/name
	notify func(*corev1.Pod)
}

var (
	_ vknode.PodLifecycleHandler = (*provider)(nil)
	_ vknode.PodNotifier         = (*provider)(nil)
)

func podKey(namespace, name string) string { return namespace + "/" + name }

// CreatePod gives the pod an address and a sandbox and starts its
// containers in the background. An error (no free address, ip failing)
// makes virtual-kubelet retry.
func (n *provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	n.mu.Lock()
	if _, ok := n.pods[key]; ok {
		n.mu.Unlock()
		return nil
	}
	n.mu.Unlock()
	p, err := n.newPodRuntime(pod)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.pods[key] = p
	n.mu.Unlock()
	p.start()
	p.notify()
	return nil
}

// newPodRuntime allocates the address and creates the sandbox and folder.
func (n *provider) newPodRuntime(pod *corev1.Pod) (*podRuntime, error) {
	addr, err := n.ipam.allocate()
	if err != nil {
		return nil, err
	}
	sb, err := newSandbox(n.ip, n.bridge, string(pod.UID), addr)
	if err != nil {
		n.ipam.release(addr)
		return nil, err
	}
	dir := filepath.Join(n.cfg.StateDir, "pods", string(pod.UID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		_ = sb.delete()
		n.ipam.release(addr)
		return nil, fmt.Errorf("node: pod folder: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &podRuntime{
		node: n, ctx: ctx, cancel: cancel,
		kick: make(chan struct{}, 1), done: make(chan struct{}), conds: newConditionClock(),
		pod: pod.DeepCopy(), sb: sb, addr: addr, dir: dir, startTime: metav1.Now(),
	}
	for _, c := range pod.Spec.Containers {
		p.containers = append(p.containers, &container{pod: p, spec: c,
			state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
	}
	return p, nil
}

// UpdatePod takes the pod's new metadata (labels, annotations). Changes to
// a running container (an image update) are not applied: the containers
// keep running what they started with.
func (n *provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	p := n.lookup(pod.Namespace, pod.Name)
	if p == nil {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	p.mu.Lock()
	p.pod.Labels, p.pod.Annotations = pod.Labels, pod.Annotations
	p.mu.Unlock()
	return nil
}

// DeletePod starts the pod's termination with its deletion grace period and
// returns; the final status (every container terminated) is reported when
// the processes are gone, and the pod is then forgotten.
func (n *provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p := n.lookup(pod.Namespace, pod.Name)
	if p == nil {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	grace := pod.DeletionGracePeriodSeconds
	if grace == nil {
		grace = pod.Spec.TerminationGracePeriodSeconds
	}
	go func() {
		p.terminate(gracePeriod(grace))
		<-p.done
		n.mu.Lock()
		if n.pods[podKey(pod.Namespace, pod.Name)] == p {
			delete(n.pods, podKey(pod.Namespace, pod.Name))
		}
		n.mu.Unlock()
	}()
	return nil
}

// GetPod returns the pod with its current status.
func (n *provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p := n.lookup(namespace, name)
	if p == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	return p.snapshot(), nil
}

// GetPodStatus returns the pod's current status.
func (n *provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := n.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every pod on the node.
func (n *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	n.mu.Lock()
	all := make([]*podRuntime, 0, len(n.pods))
	for _, p := range n.pods {
		all = append(all, p)
	}
	n.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(all))
	for _, p := range all {
		out = append(out, p.snapshot())
	}
	return out, nil
}

// NotifyPods registers virtual-kubelet's status callback.
func (n *provider) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	n.mu.Lock()
	n.notify = cb
	n.mu.Unlock()
}

// report hands a status to virtual-kubelet.
func (n *provider) report(pod *corev1.Pod) {
	n.mu.Lock()
	cb := n.notify
	n.mu.Unlock()
	if cb != nil {
		cb(pod)
	}
}

func (n *provider) lookup(namespace, name string) *podRuntime {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pods[podKey(namespace, name)]
}

// hostIP is the Node's InternalIP: the bridge's address.
func (n *provider) hostIP() string { return n.bridge.gateway.String() }

// logPath is where a container run's output goes.
func (n *provider) logPath(pod *corev1.Pod, container string, restarts int32) string {
	return filepath.Join(n.cfg.StateDir, "logs", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), container, strconv.Itoa(int(restarts))+".log")
}

// shutdown kills every pod at once (grace 0) and waits for them.
func (n *provider) shutdown() {
	n.mu.Lock()
	all := make([]*podRuntime, 0, len(n.pods))
	for _, p := range n.pods {
		all = append(all, p)
	}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Add(1)
		go func() { defer wg.Done(); p.terminate(0); waitClosed(p.done, 5*time.Second) }()
	}
	wg.Wait()
}

// waitClosed waits for ch to close, at most d.
func waitClosed(ch <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}
