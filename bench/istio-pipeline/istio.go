// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"istio.io/istio/pilot/pkg/features"
	istioxds "istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/config/schema/gvr"
	kubelib "istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/kclient/clienttest"
	istiolog "istio.io/istio/pkg/log"
)

// IstioSide is Istio's in-process discovery server (pilot/test/xds
// FakeDiscoveryServer): the kube service registry, the Gateway API
// controller with the inference extension on (its InferencePool CRD
// installed in the fake client), the config store (the EPP's
// DestinationRule) and the ADS server with Istio's generators, as istiod
// wires them, over Istio's own fake kube client. Gateway proxies get what
// istiod would send them: the server builds every push for the connected
// router proxy of each Gateway.
func IstioSide() Side {
	return Side{Name: "istio", Prepare: func(in *Inputs) (Instance, error) {
		i := &istio{in: in, t: &failer{}}
		err := i.t.run(func() {
			i.client = kubelib.NewFakeClient(in.Objects...)
			clienttest.MakeCRD(i.t, i.client, gvr.InferencePool)
			noopShadowServiceApply(i.client)
		})
		if err != nil {
			i.t.cleanup()
			return nil, err
		}
		return i, nil
	}}
}

func init() {
	// Istio's settings are package variables read when its controllers are
	// built: the inference extension is off by default, as in istiod.
	features.EnableGatewayAPIInferenceExtension = true
	// Istio logs every push at info; keep errors, on stderr, so that they
	// never split a benchmark result line on stdout.
	o := istiolog.DefaultOptions()
	o.OutputPaths = []string{"stderr"}
	if err := istiolog.Configure(o); err != nil {
		panic(err)
	}
	for _, s := range istiolog.Scopes() {
		s.SetOutputLevel(istiolog.ErrorLevel)
	}
}

// noopShadowServiceApply makes a server-side apply of a Service that
// exists answer with the stored object, unchanged, as an API server does
// when the applied fields already hold: no write, no watch event.
//
// Why: Istio's Gateway controller applies every pool's shadow Service on
// every replica at start and again on each update event of such a
// Service. The fake clientset implements apply with a field-managed
// tracker that builds a REST mapper per call and stores (and announces)
// every apply as a change, so Istio's applies would feed their own update
// events and keep the process busy for as long as it runs, which no real
// API server causes. Istio still computes and sends every apply; only the
// fake server's side of it is cut. The inputs already hold each shadow
// Service as both control planes write it (Load).
func noopShadowServiceApply(c kubelib.Client) {
	cs, ok := c.Kube().(*k8sfake.Clientset)
	if !ok {
		return
	}
	cs.PrependReactor("patch", "services", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		p, ok := a.(k8stesting.PatchAction)
		if !ok || p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		obj, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("services"), p.GetNamespace(), p.GetName())
		if err != nil {
			return false, nil, nil // not there: the fake's own apply creates it
		}
		return true, obj, nil
	})
}

type istio struct {
	in     *Inputs
	t      *failer
	client kubelib.Client
	fake   *istioxds.FakeDiscoveryServer
}

func (i *istio) Start() error {
	return i.t.run(func() {
		i.fake = istioxds.NewFakeDiscoveryServer(i.t, istioxds.FakeOptions{
			KubeClientBuilder: func(...k8sruntime.Object) kubelib.Client { return i.client },
			ConfigString:      i.in.DestinationRuleYAML,
		})
	})
}

func (i *istio) Dial() (*grpc.ClientConn, error) {
	if i.fake == nil {
		return nil, errors.New("not started")
	}
	return dialBufconn(i.fake.BufListener)
}

func (i *istio) UpdateHTTPRoute(r *gwv1.HTTPRoute) error {
	_, err := i.client.GatewayAPI().GatewayV1().HTTPRoutes(r.Namespace).Update(context.Background(), r, metav1.UpdateOptions{})
	return err
}

func (i *istio) UpdateEndpointSlice(s *discoveryv1.EndpointSlice) error {
	_, err := i.client.Kube().DiscoveryV1().EndpointSlices(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{})
	return err
}

func (i *istio) Busy() bool {
	if i.fake == nil {
		return false
	}
	d := i.fake.Discovery
	return d.InboundUpdates.Load() != d.CommittedUpdates.Load()
}

func (i *istio) Close() {
	i.t.cleanup()
	i.fake = nil
	i.client = nil
}

// failer is the test.Failer Istio's test helpers take: Fatal ends the
// goroutine that run started and makes run return the message; Cleanup
// functions run, last first, on cleanup.
type failer struct {
	mu       sync.Mutex
	cleanups []func()
	msg      string
}

// run calls f on its own goroutine (so that FailNow can end it) and
// returns the failure f reported, if any.
func (f *failer) run(fn func()) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.msg != "" {
		return errors.New(f.msg)
	}
	return nil
}

func (f *failer) cleanup() {
	f.mu.Lock()
	cs := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

func (f *failer) Fail() { f.fail("failed") }
func (f *failer) FailNow() {
	f.fail("failed")
	runtime.Goexit()
}
func (f *failer) Fatal(args ...any) {
	f.fail(fmt.Sprint(args...))
	runtime.Goexit()
}
func (f *failer) Fatalf(format string, args ...any) {
	f.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (f *failer) Log(args ...any)                 {}
func (f *failer) Logf(format string, args ...any) {}
func (f *failer) TempDir() string {
	d, err := os.MkdirTemp("", "istio-side-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(d) })
	return d
}
func (f *failer) Helper() {}
func (f *failer) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}
func (f *failer) Skip(args ...any) { f.Fatal(append([]any{"skip: "}, args...)...) }

func (f *failer) fail(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.msg == "" {
		f.msg = msg
	}
}
