// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vkslog "github.com/virtual-kubelet/virtual-kubelet/log/slog"
	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// leaseDuration is the Node Lease's duration, the kubelet's default; the
// lease controller renews it every quarter of that.
const leaseDuration = 40

// startTimeout bounds how long Start waits for the Node and the pod
// controller to be ready.
const startTimeout = 60 * time.Second

// podSyncWorkers is how many pods virtual-kubelet syncs at once.
const podSyncWorkers = 4

// Node is a running node agent. Stop it with Stop.
type Node struct {
	// LogDir is the folder of the container logs; see Config.StateDir.
	LogDir string

	p       *provider
	cancel  context.CancelFunc
	nodeCtl *vknode.NodeController
	podCtl  *vknode.PodController
	events  record.EventBroadcaster
	vkLog   *os.File
	stop    sync.Once
	stopErr error
}

// Start builds the pod network (bridge, API forwarder), registers the Node
// with its Lease through virtual-kubelet's NodeController, and starts
// virtual-kubelet's PodController for the pods bound to cfg.NodeName. It
// returns once both are running; on error it undoes what it did.
// virtual-kubelet's own log goes to StateDir/virtual-kubelet.log.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := needRoot(); err != nil {
		return nil, err
	}
	n := &Node{LogDir: filepath.Join(cfg.StateDir, "logs")}
	ok := false
	defer func() {
		if !ok {
			n.Stop()
		}
	}()
	p, err := newProvider(cfg)
	n.p = p
	if err != nil {
		return nil, err
	}
	if err := n.startControllers(ctx, cfg); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

// newProvider makes the network: bridge, address pool, API forwarder.
func newProvider(cfg Config) (*provider, error) {
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	ip, err := findIPTool()
	if err != nil {
		return nil, err
	}
	p := &provider{cfg: cfg, ip: ip, ipam: newIPAM(cfg.PodCIDR), pods: map[string]*podRuntime{}}
	if p.bridge, err = newBridge(ip, cfg.BridgeName, cfg.PodCIDR); err != nil {
		return p, err
	}
	api, err := url.Parse(cfg.RESTConfig.Host)
	if err != nil || api.Port() == "" {
		return p, fmt.Errorf("node: API server address %q: want https://host:port", cfg.RESTConfig.Host)
	}
	p.forwarder, err = newAPIForwarder(net.JoinHostPort(p.hostIP(), "0"), api.Host)
	if err != nil {
		return p, fmt.Errorf("node: API forwarder: %w", err)
	}
	if len(cfg.KubeletClientCA) > 0 {
		if p.kubeletAPI, err = startKubeletAPI(p); err != nil {
			return p, err
		}
	}
	return p, nil
}

// startControllers starts the informers, the event recorder and the two
// virtual-kubelet controllers, and waits until both are ready.
func (n *Node) startControllers(ctx context.Context, cfg Config) error {
	logf, err := os.Create(filepath.Join(cfg.StateDir, "virtual-kubelet.log"))
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.vkLog = logf
	ctx, n.cancel = context.WithCancel(vklog.WithLogger(context.WithoutCancel(ctx), vkslog.FromSlog(slog.New(slog.NewTextHandler(logf, nil)))))

	client := cfg.Client
	n.events = record.NewBroadcaster(record.WithContext(ctx))
	n.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	n.p.recorder = n.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: cfg.NodeName})

	podFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	}))
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := podFactory.Core().V1().Pods()
	services, configMaps, secrets := factory.Core().V1().Services(), factory.Core().V1().ConfigMaps(), factory.Core().V1().Secrets()
	n.p.env = envSources{services: services.Lister(), configMaps: configMaps.Lister(), secrets: secrets.Lister()}

	n.nodeCtl, err = vknode.NewNodeController(vknode.NaiveNodeProvider{}, n.p.nodeObject(), client.CoreV1().Nodes(),
		vknode.WithNodeEnableLeaseV1(client.CoordinationV1().Leases(corev1.NamespaceNodeLease), leaseDuration))
	if err != nil {
		return fmt.Errorf("node: node controller: %w", err)
	}
	n.podCtl, err = vknode.NewPodController(vknode.PodControllerConfig{
		PodClient: client.CoreV1(), PodInformer: pods, EventRecorder: n.p.recorder, Provider: n.p,
		ConfigMapInformer: configMaps, SecretInformer: secrets, ServiceInformer: services,
		// The provider builds the environment itself, once the pod has its
		// address, as the kubelet does (virtual-kubelet's own resolution
		// runs before status.podIP exists).
		SkipDownwardAPIResolution: true,
	})
	if err != nil {
		return fmt.Errorf("node: pod controller: %w", err)
	}
	podFactory.Start(ctx.Done())
	factory.Start(ctx.Done())
	for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return fmt.Errorf("node: %v informer did not sync", typ)
		}
	}
	go func() { _ = n.nodeCtl.Run(ctx) }()
	if err := waitReady(n.nodeCtl.Ready(), n.nodeCtl.Done(), n.nodeCtl.Err, "node controller"); err != nil {
		return err
	}
	go func() { _ = n.podCtl.Run(ctx, podSyncWorkers) }()
	return waitReady(n.podCtl.Ready(), n.podCtl.Done(), n.podCtl.Err, "pod controller")
}

// waitReady waits for ready, failing if done closes first or startTimeout passes.
func waitReady(ready, done <-chan struct{}, errf func() error, what string) error {
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case <-done:
		return fmt.Errorf("node: %s stopped: %w", what, errf())
	case <-t.C:
		return fmt.Errorf("node: %s not ready after %v", what, startTimeout)
	}
}

// Stop stops the controllers, kills every pod's processes at once, and
// removes the sandboxes, the bridge and the forwarder. The Node object and
// the pods stay in the API, as when a kubelet stops.
func (n *Node) Stop() error {
	n.stop.Do(func() { n.stopErr = n.doStop() })
	return n.stopErr
}

func (n *Node) doStop() error {
	if n.cancel != nil {
		n.cancel()
		if n.nodeCtl != nil {
			waitClosed(n.nodeCtl.Done(), 10*time.Second)
		}
		if n.podCtl != nil {
			waitClosed(n.podCtl.Done(), 10*time.Second)
		}
	}
	if n.events != nil {
		n.events.Shutdown()
	}
	var errs []error
	if p := n.p; p != nil {
		p.shutdown()
		if p.forwarder != nil {
			errs = append(errs, p.forwarder.close())
		}
		if p.kubeletAPI != nil {
			errs = append(errs, p.kubeletAPI.close())
		}
		if p.bridge != nil {
			errs = append(errs, p.bridge.delete())
		}
	}
	if n.vkLog != nil {
		errs = append(errs, n.vkLog.Close())
	}
	return errors.Join(errs...)
}

// APIAddress is the host:port on the bridge where the node forwards
// connections to the API server (what pods' kubeconfigs name).
func (n *Node) APIAddress() string { return n.p.forwarder.addr() }

// LogPath returns the log file of a container run of a pod on this node.
func (n *Node) LogPath(pod *corev1.Pod, container string, restartCount int32) string {
	return n.p.logPath(pod, container, restartCount)
}
