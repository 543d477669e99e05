// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"
	inferenceinformers "sigs.k8s.io/gateway-api-inference-extension/client-go/informers/externalversions"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/infermesh/infermesh/pkg/version"
)

// Client is the control plane's one handle on a cluster: the clientsets for
// every API it reads or writes, the shared informer factories over them, and
// the krt collections built on those informers (see collections.go).
//
// Lifecycle: build it, ask for the collections you need, then Start. The
// first Start's stop channel (or Shutdown) ends the Client: every informer
// stops and every collection is released. A Client is safe for concurrent
// use.
type Client struct {
	config *rest.Config // nil for fakes

	kube      kubernetes.Interface
	gateway   gatewayclient.Interface
	inference inferenceclient.Interface
	dynamic   dynamic.Interface

	kubeInformers      informers.SharedInformerFactory
	gatewayInformers   gatewayinformers.SharedInformerFactory
	inferenceInformers inferenceinformers.SharedInformerFactory
	dynamicInformers   dynamicinformer.DynamicSharedInformerFactory

	opts options
	// strip is the managedFields transform of every informer
	// (keepAppliedFields of WithAppliedFieldsOf).
	strip cache.TransformFunc

	stop     chan struct{} // closed once when the Client ends
	stopOnce sync.Once
	runMu    sync.Mutex     // orders runs.Add against Shutdown's runs.Wait
	runs     sync.WaitGroup // goroutines of optional-CRD informers

	mu          sync.Mutex
	started     bool
	collections map[string]any // memoized collections by name
	optionals   []optionalSource
}

// NewFromKubeconfig builds a Client from the kubeconfig file at path. An empty
// path means client-go's default loading rules ($KUBECONFIG, then
// ~/.kube/config).
func NewFromKubeconfig(path string, opts ...Option) (*Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kube: load kubeconfig %q: %w", path, err)
	}
	return NewFromRESTConfig(cfg, opts...)
}

// NewInCluster builds a Client from the service account of the pod it runs in.
func NewInCluster(opts ...Option) (*Client, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("kube: in-cluster config: %w", err)
	}
	return NewFromRESTConfig(cfg, opts...)
}

// NewFromRESTConfig builds a Client from cfg, which it copies and does not
// keep. The rate limit comes from the options (WithQPS, WithBurst): cfg's
// QPS, Burst and RateLimiter are replaced by one token bucket shared by all
// clientsets, so the limit holds for the Client as a whole. All clientsets
// share one HTTP client (one connection pool); the core clientset speaks
// protobuf, the CRD clientsets JSON.
func NewFromRESTConfig(cfg *rest.Config, opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.qps, o.burst)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "infermesh/" + version.Version
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: HTTP client: %w", err)
	}
	clients, err := newClientsets(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	c := newClient(clients, o)
	c.config = cfg
	return c, nil
}

type clientsets struct {
	kube      kubernetes.Interface
	gateway   gatewayclient.Interface
	inference inferenceclient.Interface
	dynamic   dynamic.Interface
}

func newClientsets(cfg *rest.Config, httpClient *http.Client) (clientsets, error) {
	var (
		cs  clientsets
		err error
	)
	kubeCfg := rest.CopyConfig(cfg)
	kubeCfg.ContentType = runtime.ContentTypeProtobuf
	kubeCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if cs.kube, err = kubernetes.NewForConfigAndClient(kubeCfg, httpClient); err != nil {
		return cs, fmt.Errorf("kube: core clientset: %w", err)
	}
	if cs.gateway, err = gatewayclient.NewForConfigAndClient(cfg, httpClient); err != nil {
		return cs, fmt.Errorf("kube: Gateway API clientset: %w", err)
	}
	if cs.inference, err = inferenceclient.NewForConfigAndClient(cfg, httpClient); err != nil {
		return cs, fmt.Errorf("kube: inference extension clientset: %w", err)
	}
	if cs.dynamic, err = dynamic.NewForConfigAndClient(cfg, httpClient); err != nil {
		return cs, fmt.Errorf("kube: dynamic client: %w", err)
	}
	return cs, nil
}

func newClient(cs clientsets, o options) *Client {
	strip := keepAppliedFields(o.appliedFieldsOf)
	return &Client{
		kube:      cs.kube,
		gateway:   cs.gateway,
		inference: cs.inference,
		dynamic:   cs.dynamic,
		kubeInformers: informers.NewSharedInformerFactoryWithOptions(cs.kube, o.resync,
			informers.WithTransform(withTLSSecrets(strip))),
		gatewayInformers: gatewayinformers.NewSharedInformerFactoryWithOptions(cs.gateway, o.resync,
			gatewayinformers.WithTransform(strip)),
		inferenceInformers: inferenceinformers.NewSharedInformerFactoryWithOptions(cs.inference, o.resync,
			inferenceinformers.WithTransform(strip)),
		dynamicInformers: dynamicinformer.NewDynamicSharedInformerFactory(cs.dynamic, o.resync),
		opts:             o,
		strip:            strip,
		stop:             make(chan struct{}),
		collections:      map[string]any{},
	}
}

// RESTConfig returns the configuration the clientsets were built from (rate
// limit and user agent applied), or nil for a fake Client. Do not modify it.
func (c *Client) RESTConfig() *rest.Config { return c.config }

// Kube returns the core Kubernetes clientset.
func (c *Client) Kube() kubernetes.Interface { return c.kube }

// GatewayAPI returns the Gateway API clientset (sigs.k8s.io/gateway-api).
func (c *Client) GatewayAPI() gatewayclient.Interface { return c.gateway }

// Inference returns the Gateway API Inference Extension clientset.
func (c *Client) Inference() inferenceclient.Interface { return c.inference }

// Dynamic returns the dynamic client.
func (c *Client) Dynamic() dynamic.Interface { return c.dynamic }

// KubeInformers returns the shared informer factory of core types. Its
// informers strip managedFields.
func (c *Client) KubeInformers() informers.SharedInformerFactory { return c.kubeInformers }

// GatewayInformers returns the shared informer factory of Gateway API types.
// Its informers strip managedFields. GRPCRoute, BackendTLSPolicy, ListenerSet,
// TLSRoute and TCPRoute are optional CRDs: use their collection methods
// (GRPCRoutes, BackendTLSPolicies, ListenerSets, TLSRoutes, TCPRoutes) rather than this
// factory, whose informers would never sync on a cluster without them.
func (c *Client) GatewayInformers() gatewayinformers.SharedInformerFactory { return c.gatewayInformers }

// InferenceInformers returns the shared informer factory of inference
// extension types. Its informers strip managedFields. InferencePool is an
// optional CRD: prefer InferencePools, which waits for it.
func (c *Client) InferenceInformers() inferenceinformers.SharedInformerFactory {
	return c.inferenceInformers
}

// DynamicInformer returns the shared dynamic informer of gvr, with the
// managedFields transform set. Ask for it before Start.
func (c *Client) DynamicInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	inf := c.dynamicInformers.ForResource(gvr).Informer()
	// SetTransform fails only once the informer has started, and then the
	// transform was set by the call that created it.
	_ = inf.SetTransform(c.strip)
	return inf
}

// Start starts every informer created so far and, when collections are
// created later, theirs too. The stop channel of the first call ends the
// Client (see Shutdown); later calls only start what is new.
func (c *Client) Start(stop <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		c.started = true
		go func() {
			select {
			case <-stop:
				c.close()
			case <-c.stop:
			}
		}()
	}
	c.startLocked()
}

// startLocked starts the factories' informers that are not running yet and
// the optional sources. Factories' Start is idempotent.
func (c *Client) startLocked() {
	c.kubeInformers.Start(c.stop)
	c.gatewayInformers.Start(c.stop)
	c.inferenceInformers.Start(c.stop)
	c.dynamicInformers.Start(c.stop)
	for _, o := range c.optionals {
		o.start()
	}
}

// WaitForCacheSync blocks until every started informer has synced and every
// optional collection has either found its CRD absent or synced its informer.
// It returns false if stop (or the Client) closes first. The krt collections
// over the informers sync a little later, on their own: wait on those with
// their WaitUntilSynced.
func (c *Client) WaitForCacheSync(stop <-chan struct{}) bool {
	merged := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(merged)
		select {
		case <-stop:
		case <-c.stop:
		case <-done:
		}
	}()
	ok := allTrue(c.kubeInformers.WaitForCacheSync(merged)) &&
		allTrue(c.gatewayInformers.WaitForCacheSync(merged)) &&
		allTrue(c.inferenceInformers.WaitForCacheSync(merged)) &&
		allTrue(c.dynamicInformers.WaitForCacheSync(merged))
	if !ok {
		return false
	}
	c.mu.Lock()
	optionals := append([]optionalSource(nil), c.optionals...)
	c.mu.Unlock()
	for _, o := range optionals {
		if !o.waitUntilSynced(merged) {
			return false
		}
	}
	return true
}

func allTrue[K comparable](m map[K]bool) bool {
	for _, ok := range m {
		if !ok {
			return false
		}
	}
	return true
}

// Shutdown ends the Client (if its stop channel has not already) and waits
// until every informer goroutine has exited. Safe to call more than once.
func (c *Client) Shutdown() {
	c.close()
	c.kubeInformers.Shutdown()
	c.gatewayInformers.Shutdown()
	c.inferenceInformers.Shutdown()
	c.dynamicInformers.Shutdown()
	c.runs.Wait()
}

// close ends the Client. It holds runMu so that every goRun either sees the
// Client ended or has added its goroutines to runs before close returns.
func (c *Client) close() {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	c.stopOnce.Do(func() { close(c.stop) })
}

// goRun starts each of fs on its own goroutine, all or none: none once the
// Client has ended. Shutdown waits for them.
func (c *Client) goRun(fs ...func()) bool {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	select {
	case <-c.stop:
		return false
	default:
	}
	c.runs.Add(len(fs))
	for _, f := range fs {
		go func() {
			defer c.runs.Done()
			f()
		}()
	}
	return true
}
