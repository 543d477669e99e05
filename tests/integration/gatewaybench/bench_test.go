// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package gatewaybench benchmarks the Gateway API and InferencePool
// controller against a real cluster. It is not part
// of make test; run it with
//
//	KUBE_TEST_BINARIES=$(hack/k8s-test-binaries.sh)/bin \
//	  go test -tags=integ -run '^$' -bench . -benchtime 5x -timeout 30m ./tests/integration/gatewaybench/
package gatewaybench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/test/controller"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

const (
	pools        = 1000
	gateways     = 10
	podsPerPool  = 10
	ns           = "bench"
	clientQPS    = 2000
	clientBurst  = 4000
	workersAdmin = 16
)

// BenchmarkPoolBatch measures, for a batch changing all 1,000 pools at once
// (each pool's target port flips between 8000 and 8001), the time from the
// first pool update sent to every shadow Service carrying the new target
// port and every pool's status carrying the new observedGeneration, as seen
// by a watching client. Each pool has one HTTPRoute on one of 10 Gateways
// and 10 pods. The controller's client runs at QPS 2000, burst 4000.
//
// Metrics: s/batch (the whole op), after-last-write-s (from the last pool
// update's response to convergence: what the controller adds beyond the
// admin's own writes).
func BenchmarkPoolBatch(b *testing.B) {
	env := kubeenv.Start(b, kubeenv.WithStandardCRDs())
	admin, err := kube.NewFromRESTConfig(env.RESTConfig(), kube.WithQPS(clientQPS), kube.WithBurst(clientBurst))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	setUp(b, admin)
	controller.Start(b, env.RESTConfig(), map[string]string{"ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true"},
		kube.WithQPS(clientQPS), kube.WithBurst(clientBurst))

	// The watcher: the admin's own informers.
	stop := make(chan struct{})
	defer close(stop)
	services, poolObjs := admin.Services(), admin.InferencePools()
	admin.Start(stop)
	if !admin.WaitForCacheSync(stop) {
		b.Fatal("admin informers not synced")
	}
	port := int32(8000)
	converged := func() (bool, string) {
		for i := range pools {
			name := poolName(i)
			p := poolObjs.GetKey(ns + "/" + name)
			if p == nil {
				return false, name + ": pool not seen"
			}
			s := services.GetKey(ns + "/" + gateway.ShadowServiceName(name))
			if s == nil || (*s).Spec.Ports[0].TargetPort.IntValue() != int(port) {
				return false, name + ": shadow Service not at the new port"
			}
			st := (*p).Status.Parents
			if len(st) != 1 || st[0].Conditions[0].ObservedGeneration != (*p).Generation || (*p).Spec.TargetPorts[0].Number != inferencev1.PortNumber(port) {
				return false, name + ": status not at the pool's generation"
			}
		}
		return true, ""
	}
	waitConverged := func(within time.Duration) {
		var last string
		poll.UntilOr(b, within, "all shadow Services and statuses", func() bool {
			ok, why := converged()
			last = why
			return ok
		}, func() string { return last })
	}
	waitConverged(5 * time.Minute)

	var total, tail time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		port = 8000 + int32((i+1)%2)
		start := time.Now()
		updatePools(b, ctx, admin, port)
		lastWrite := time.Now()
		waitConverged(5 * time.Minute)
		end := time.Now()
		total += end.Sub(start)
		tail += end.Sub(lastWrite)
	}
	b.StopTimer()
	b.ReportMetric(total.Seconds()/float64(b.N), "s/batch")
	b.ReportMetric(tail.Seconds()/float64(b.N), "after-last-write-s")
}

func poolName(i int) string { return fmt.Sprintf("pool-%04d", i) }

// setUp creates the namespaces, 10 Gateways, one EPP Service, and per pool
// the pool, its route and its pods.
func setUp(b *testing.B, c *kube.Client) {
	b.Helper()
	ctx := context.Background()
	for _, n := range []string{ns, seed.GatewayNamespace} {
		if _, err := c.Kube().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for g := range gateways {
		gw := seed.Gateway()
		gw.Name = fmt.Sprintf("gateway-%d", g)
		if _, err := c.GatewayAPI().GatewayV1().Gateways(seed.GatewayNamespace).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	epp := seed.EPPService()
	epp.Namespace = ns
	if _, err := c.Kube().CoreV1().Services(ns).Create(ctx, epp, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	parallel(b, pools, func(i int) error {
		name := poolName(i)
		pool := seed.InferencePool()
		pool.Namespace, pool.Name = ns, name
		pool.Spec.Selector.MatchLabels = map[inferencev1.LabelKey]inferencev1.LabelValue{"app": inferencev1.LabelValue(name)}
		if _, err := c.Inference().InferenceV1().InferencePools(ns).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
			return err
		}
		route := seed.HTTPRoute()
		route.Namespace, route.Name = ns, name
		route.Spec.ParentRefs[0].Name = gwv1.ObjectName(fmt.Sprintf("gateway-%d", i%gateways))
		route.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(name + ".example.com")}
		route.Spec.Rules[0].BackendRefs[0].Name = gwv1.ObjectName(name)
		if _, err := c.GatewayAPI().GatewayV1().HTTPRoutes(ns).Create(ctx, route, metav1.CreateOptions{}); err != nil {
			return err
		}
		for p := range podsPerPool {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, p), Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm",
					Ports: []corev1.ContainerPort{{ContainerPort: 8000}}}}, TerminationGracePeriodSeconds: ptr.To(int64(0))},
			}
			if _, err := c.Kube().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
}

// updatePools sets every pool's target port to port.
func updatePools(b *testing.B, ctx context.Context, c *kube.Client, port int32) {
	b.Helper()
	parallel(b, pools, func(i int) error {
		api := c.Inference().InferenceV1().InferencePools(ns)
		p, err := api.Get(ctx, poolName(i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Spec.TargetPorts = []inferencev1.Port{{Number: inferencev1.PortNumber(port)}}
		_, err = api.Update(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// parallel runs f(0..n-1), workersAdmin at a time, and fails on the first
// error.
func parallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	var g errgroup.Group
	g.SetLimit(workersAdmin)
	for i := range n {
		g.Go(func() error {
			if err := f(i); err != nil {
				return fmt.Errorf("%d: %w", i, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}
