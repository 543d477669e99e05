// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package writer_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/apply"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/leaderelection"
	"github.com/infermesh/infermesh/pkg/kube/status"
	"github.com/infermesh/infermesh/pkg/kube/writer"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

const (
	manager   = "istio.io/inference-pool-controller"
	label     = "istio.io/inferencepool-name"
	leaseName = "infermesh-writer"
)

type (
	svcAC       = *corev1ac.ServiceApplyConfiguration
	svcDesired  = writer.Desired[svcAC]
	routeStatus = writer.DesiredStatus[gatewayv1.RouteParentStatus]
)

// ourController is our controllerName in route status.
const ourController = "istio.io/gateway-controller"

var routeParents = status.ParentAccess[gatewayv1.RouteParentStatus]{
	Controller: func(p *gatewayv1.RouteParentStatus) string { return string(p.ControllerName) },
	Key:        func(p *gatewayv1.RouteParentStatus) string { return string(p.ParentRef.Name) },
	Conditions: func(p *gatewayv1.RouteParentStatus) *[]metav1.Condition { return &p.Conditions },
}

// shadow is a desired shadow Service selecting app=selector.
func shadow(ns, name, selector string) svcDesired {
	return svcDesired{Namespace: ns, Name: name, Apply: corev1ac.Service(name, ns).
		WithLabels(map[string]string{label: "pool"}).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP("None").
			WithSelector(map[string]string{"app": selector}).
			WithPorts(corev1ac.ServicePort().WithName("http-0").WithPort(54321).WithProtocol(corev1.ProtocolTCP)))}
}

// instance is one control-plane replica: its own kube.Client (with its own
// user agent, which the audit log records), event recorder, Elector and
// OwnedWriter over the shared desired collection.
type instance struct {
	name    string // user agent and Lease holder identity
	client  *kube.Client
	elector *leaderelection.Elector
	// crashed makes every later request of this replica fail before it
	// leaves the process, as if the process had died: nothing more reaches
	// the API server, the Lease is neither renewed nor released.
	crashed *atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// crashable fails every request once crashed is set.
type crashable struct {
	rt      http.RoundTripper
	crashed *atomic.Bool
}

func (c crashable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.crashed.Load() {
		return nil, errors.New("replica crashed")
	}
	return c.rt.RoundTrip(r)
}

// startInstance starts a replica writing desired Services and, if routes is
// not nil, our entries of HTTPRoute status.parents.
func startInstance(t *testing.T, env *kubeenv.Env, ns, name string, desired krt.Collection[svcDesired],
	routes krt.Collection[routeStatus],
) *instance {
	t.Helper()
	in := &instance{name: name, crashed: new(atomic.Bool), done: make(chan struct{})}
	cfg := env.RESTConfig()
	cfg.UserAgent = name
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return crashable{rt, in.crashed} }
	client, err := kube.NewFromRESTConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in.client = client
	live := client.Services()

	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.Kube().CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "infermesh", Host: name})

	elector, err := leaderelection.New(leaderelection.Config{
		Client: client.Kube(), Namespace: ns, Name: leaseName, Identity: name,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	in.elector = elector
	w, err := writer.NewOwnedWriter(writer.OwnedConfig[*corev1.Service, svcAC]{
		Name:    "shadow-services",
		Desired: desired,
		Live:    live,
		Owned: &apply.Owned[*corev1.Service, svcAC]{
			FieldManager: manager, OwnerLabel: label, Extract: corev1ac.ExtractService, Recorder: recorder,
		},
		Client:   func(ns string) apply.Client[*corev1.Service, svcAC] { return client.Kube().CoreV1().Services(ns) },
		IsLeader: elector.IsLeader,
	})
	if err != nil {
		t.Fatal(err)
	}
	elector.AddRunFunction(w.Run)
	if routes != nil {
		elector.AddRunFunction(routeStatusWriter(t, client, routes, elector.IsLeader).Run)
	}

	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	stop := make(chan struct{})
	client.Start(stop)
	go func() {
		defer close(in.done)
		elector.Run(ctx)
		close(stop)
		client.Shutdown()
		broadcaster.Shutdown()
	}()
	t.Cleanup(in.stop)
	return in
}

// stop ends the replica gracefully (or, after crash, just its goroutines)
// and waits for it.
func (in *instance) stop() {
	in.cancel()
	<-in.done
}

// crash cuts the replica off the API server, then stops its goroutines: the
// Elector's release of the Lease fails like every other request.
func (in *instance) crash() {
	in.crashed.Store(true)
	in.stop()
}

func routeStatusWriter(t *testing.T, client *kube.Client, routes krt.Collection[routeStatus], isLeader func() bool,
) *writer.StatusWriter[*gatewayv1.HTTPRoute, gatewayv1.RouteParentStatus] {
	t.Helper()
	api := client.GatewayAPI().GatewayV1()
	w, err := writer.NewStatusWriter(writer.StatusConfig[*gatewayv1.HTTPRoute, gatewayv1.RouteParentStatus]{
		Name:       "route-status",
		Desired:    routes,
		Live:       client.HTTPRoutes(),
		Controller: ourController,
		Access:     routeParents,
		Get: func(ctx context.Context, ns, name string) (*gatewayv1.HTTPRoute, error) {
			return api.HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Parents: func(r *gatewayv1.HTTPRoute) []gatewayv1.RouteParentStatus { return r.Status.Parents },
		WithParents: func(r *gatewayv1.HTTPRoute, p []gatewayv1.RouteParentStatus) *gatewayv1.HTTPRoute {
			r = r.DeepCopy()
			r.Status.Parents = p
			return r
		},
		UpdateStatus: func(ctx context.Context, r *gatewayv1.HTTPRoute) error {
			_, err := api.HTTPRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{FieldManager: ourController})
			return err
		},
		IsLeader: isLeader,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}
