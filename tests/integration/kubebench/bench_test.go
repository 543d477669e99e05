// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package kubebench holds the benchmarks of the Kubernetes layer against a
// real cluster (pkg/test/kubeenv). They are not part of make test; run them
// with
//
//	KUBE_TEST_BINARIES=$(hack/k8s-test-binaries.sh)/bin \
//	  go test -tags=integ -run '^$' -bench . -benchtime 5x ./tests/integration/kubebench/
package kubebench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// BenchmarkWatchToCollection measures the time from sending a create to the
// pkg/kube Services collection emitting the object: the API server's write,
// its watch fan-out, the informer and krt together (the event can arrive
// before Create returns, so the clock starts before the request). One op is
// one Service.
func BenchmarkWatchToCollection(b *testing.B) {
	env := kubeenv.Start(b)
	client, err := kube.NewFromRESTConfig(env.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	svcs := client.Services()
	client.Start(stop)
	seen := make(chan string, 1024)
	reg := svcs.Register(func(e krt.Event[*corev1.Service]) {
		if e.Event == krt.EventAdd && e.New != nil {
			seen <- (*e.New).Name
		}
	})
	if !reg.WaitUntilSynced(stop) {
		b.Fatal("not synced")
	}
	drain := func() {
		for {
			select {
			case <-seen:
			default:
				return
			}
		}
	}
	drain()
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench-%d", i)
		start := time.Now()
		_, err := client.Kube().CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for got := range seen {
			if got == name {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[(len(lat)-1)*99/100].Microseconds()), "p99-us")
}
