// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// The shape of file mode and of a multi-tenant cluster (hack/gen-pools.sh):
// one namespace holding, per InferencePool, a shadow Service selecting
// app=pool-I and benchPodsPerPool ready Pods so labelled. Every computed
// slice's Fetch selects 10 Pods among pools x 10.

const benchPodsPerPool = 10

var benchPoolSizes = []int{100, 1000, 3000}

func benchPoolInputs(pools int) ([]*corev1.Service, []*corev1.Pod) {
	svcs := make([]*corev1.Service, pools)
	pods := make([]*corev1.Pod, 0, pools*benchPodsPerPool)
	for i := range pools {
		app := fmt.Sprintf("pool-%04d", i)
		svcs[i] = newService(app+"-shadow", selector("app", app))
		for j := range benchPodsPerPool {
			pods = append(pods, newPod(fmt.Sprintf("%s-%d", app, j), i*benchPodsPerPool+j, withLabels("app", app)))
		}
	}
	return svcs, pods
}

// BenchmarkPoolsSync: one op builds the static inputs from pre-generated
// objects and the EndpointSlice collection over them, and waits until it has
// synced (one computed slice per pool).
func BenchmarkPoolsSync(b *testing.B) {
	for _, pools := range benchPoolSizes {
		svcs, pods := benchPoolInputs(pools)
		b.Run(fmt.Sprintf("pools=%d", pools), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				stop := make(chan struct{})
				c := Collection(krt.NewStaticCollection(nil, svcs, krt.WithStop(stop)),
					krt.NewStaticCollection(nil, pods, krt.WithStop(stop)),
					krt.NewStaticCollection[*discoveryv1.EndpointSlice](nil, nil, krt.WithStop(stop)), krt.WithStop(stop))
				if !c.WaitUntilSynced(stop) {
					b.Fatal("not synced")
				}
				b.StopTimer()
				if n := len(c.List()); n != pools {
					b.Fatalf("%d slices, want %d", n, pools)
				}
				close(stop)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkPoolsPodReady: the collection is synced untimed; one op flips one
// Pod's readiness (round-robin over pools) and waits until its pool's slice
// shows it.
func BenchmarkPoolsPodReady(b *testing.B) {
	for _, pools := range benchPoolSizes {
		b.Run(fmt.Sprintf("pools=%d", pools), func(b *testing.B) {
			svcs, pods := benchPoolInputs(pools)
			stop := make(chan struct{})
			defer close(stop)
			podsIn := krt.NewStaticCollection(nil, pods, krt.WithStop(stop))
			c := Collection(krt.NewStaticCollection(nil, svcs, krt.WithStop(stop)), podsIn,
				krt.NewStaticCollection[*discoveryv1.EndpointSlice](nil, nil, krt.WithStop(stop)), krt.WithStop(stop))
			type seen struct {
				svc, pod string
				ready    bool
			}
			events := make(chan []seen, 1024)
			c.Register(func(e krt.Event[*discoveryv1.EndpointSlice]) {
				if e.New == nil {
					return
				}
				var out []seen
				for _, ep := range (*e.New).Endpoints {
					out = append(out, seen{(*e.New).Labels[discoveryv1.LabelServiceName], ep.TargetRef.Name, *ep.Conditions.Ready})
				}
				events <- out
			}).WaitUntilSynced(stop)
			for range pools {
				<-events
			}
			b.ReportAllocs()
			b.ResetTimer()
			for op := range b.N {
				i := (op * 7919) % pools
				p := pods[i*benchPodsPerPool].DeepCopy()
				ready := op/pools%2 == 1 // every pool's first pod goes unready, then ready again
				if !ready {
					notReady(p)
				}
				podsIn.UpdateObject(p)
				want := seen{svcs[i].Name, p.Name, ready}
			wait:
				for got := range events {
					for _, s := range got {
						if s == want {
							break wait
						}
					}
				}
			}
		})
	}
}
