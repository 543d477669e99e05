// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// registry is Build over static input collections that a test edits.
type registry struct {
	t        *testing.T
	services krt.StaticCollection[*corev1.Service]
	slices   krt.StaticCollection[*discoveryv1.EndpointSlice]
	out      Outputs
	markers  int
}

func newRegistry(t *testing.T, objs ...any) *registry {
	t.Helper()
	stop := krt.WithStop(t.Context().Done())
	r := &registry{
		t:        t,
		services: krt.NewStaticCollection[*corev1.Service](nil, nil, stop),
		slices:   krt.NewStaticCollection[*discoveryv1.EndpointSlice](nil, nil, stop),
	}
	r.apply(objs...)
	r.out = Build(Inputs{Services: r.services, EndpointSlices: r.slices},
		Options{ClusterDomain: domain, Krt: []krt.CollectionOption{stop}})
	if !r.out.Endpoints.WaitUntilSynced(t.Context().Done()) {
		t.Fatal("registry did not sync")
	}
	return r
}

// apply adds or replaces each object in its input collection.
func (r *registry) apply(objs ...any) {
	r.t.Helper()
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Service:
			r.services.UpdateObject(o)
		case *discoveryv1.EndpointSlice:
			r.slices.UpdateObject(o)
		case []*discoveryv1.EndpointSlice:
			for _, s := range o {
				r.slices.UpdateObject(s)
			}
		default:
			r.t.Fatalf("unsupported object %T", o)
		}
	}
}

// settle waits until the Endpoints collection has processed everything
// queued before it: a new marker Service's cluster appears only after them.
func (r *registry) settle() {
	r.t.Helper()
	r.markers++
	name := fmt.Sprintf("zz-marker-%d", r.markers)
	r.services.UpdateObject(service("markers", name, svcPort("http", 80)))
	cluster := ClusterName(80, ServiceHost(name, "markers", domain))
	r.eventually("marker "+name, func() bool { return r.out.Endpoints.GetKey(cluster) != nil }, nil)
}

func (r *registry) eventually(what string, cond func() bool, describe func() string) {
	r.t.Helper()
	poll.UntilOr(r.t, 10*time.Second, what, cond, describe)
}

func (r *registry) endpoints(cluster string) []model.Endpoint {
	if c := r.out.Endpoints.GetKey(cluster); c != nil {
		return c.Endpoints
	}
	return nil
}

// waitEndpoints waits until cluster has exactly want.
func (r *registry) waitEndpoints(cluster string, want []model.Endpoint) {
	r.t.Helper()
	r.eventually(cluster, func() bool { return cmp.Equal(r.endpoints(cluster), want) },
		func() string { return cmp.Diff(want, r.endpoints(cluster)) })
}

const (
	shadowCluster = "outbound|54321||" + shadowHost
	eppCluster    = "outbound|9002||" + eppHost
)

func seedObjects() []any {
	return []any{shadowService(shadowName, 8000), seed.EPPService(), seedSlices()}
}

func TestSeedScenario(t *testing.T) {
	r := newRegistry(t, seedObjects()...)
	want := []model.ClusterEndpoints{ // sorted by key: "outbound|54321..." before "outbound|9002..."
		{Cluster: shadowCluster, Endpoints: eps("10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000")},
		{Cluster: eppCluster, Endpoints: eps("10.244.0.16:9002")},
	}
	r.eventually("seed endpoints", func() bool { return cmp.Equal(r.out.Endpoints.List(), want) },
		func() string { return cmp.Diff(want, r.out.Endpoints.List()) })
}

// Scaling the model servers from 3 to 5 and losing readiness on one change
// the shadow cluster's endpoints; a Service going away removes its clusters.
func TestEndpointsFollowSlices(t *testing.T) {
	r := newRegistry(t, seedObjects()...)
	r.waitEndpoints(shadowCluster, eps("10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000"))

	scaled := seedSlices()[0]
	scaled.Endpoints = podIPs(13, 17)
	r.apply(scaled)
	r.waitEndpoints(shadowCluster, eps("10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000",
		"10.244.0.16:8000", "10.244.0.17:8000"))

	notReady := scaled.DeepCopy()
	notReady.Endpoints[1] = notReadyEP("10.244.0.14")
	r.apply(notReady)
	r.waitEndpoints(shadowCluster, eps("10.244.0.13:8000", "10.244.0.15:8000", "10.244.0.16:8000", "10.244.0.17:8000"))

	// A second slice of the same Service adds to the first.
	r.apply(endpointSlice(seed.Namespace, shadowName+"-second", shadowName, map[string]int32{"http-0": 8000}, podIPs(20, 20)...))
	r.waitEndpoints(shadowCluster, eps("10.244.0.13:8000", "10.244.0.15:8000", "10.244.0.16:8000",
		"10.244.0.17:8000", "10.244.0.20:8000"))

	r.slices.DeleteObject(seed.Namespace + "/" + shadowName + "-second")
	r.slices.DeleteObject(seed.Namespace + "/" + shadowName + "-abcde")
	r.waitEndpoints(shadowCluster, eps())

	r.services.DeleteObject(seed.Namespace + "/" + shadowName)
	r.eventually("shadow cluster removed", func() bool { return r.out.Endpoints.GetKey(shadowCluster) == nil }, nil)
}

// A slice change recomputes its own Service and no other.
func TestSliceChangeRecomputesOnlyItsService(t *testing.T) {
	objs := seedObjects()
	for i := range 20 {
		name := fmt.Sprintf("other-%d", i)
		objs = append(objs, service("apps", name, svcPort("http", 80)),
			endpointSlice("apps", name+"-a", name, map[string]int32{"http": 8080}, readyEP(fmt.Sprintf("10.1.0.%d", i))))
	}
	r := newRegistry(t, objs...)
	r.settle()

	before := krt.Stats(r.out.Endpoints).Transformations
	scaled := seedSlices()[0]
	scaled.Endpoints = podIPs(13, 17)
	r.apply(scaled)
	r.waitEndpoints(shadowCluster, eps("10.244.0.13:8000", "10.244.0.14:8000", "10.244.0.15:8000",
		"10.244.0.16:8000", "10.244.0.17:8000"))
	r.settle()
	// One run for the shadow Service, one for the marker Service.
	if got := krt.Stats(r.out.Endpoints).Transformations - before; got != 2 {
		t.Errorf("a slice change ran %d transformations, want 2 (its Service and the marker)", got)
	}
}

// The shadow Service of a pool with three target ports: the first cluster
// holds every pod on every port, the others their own port.
func TestThreeTargetPorts(t *testing.T) {
	r := newRegistry(t, shadowService(shadowName, 8000, 8001, 8002),
		endpointSlice(seed.Namespace, shadowName+"-a", shadowName,
			map[string]int32{"http-0": 8000, "http-1": 8001, "http-2": 8002}, podIPs(13, 15)...))
	var all []string
	for i := 13; i <= 15; i++ {
		for _, p := range []int{8000, 8001, 8002} {
			all = append(all, fmt.Sprintf("10.244.0.%d:%d", i, p))
		}
	}
	r.waitEndpoints(shadowCluster, eps(all...))
	r.waitEndpoints("outbound|54322||"+shadowHost, eps("10.244.0.13:8001", "10.244.0.14:8001", "10.244.0.15:8001"))
	r.waitEndpoints("outbound|54323||"+shadowHost, eps("10.244.0.13:8002", "10.244.0.14:8002", "10.244.0.15:8002"))
}

func TestBuildPanicsOnMissingInputs(t *testing.T) {
	services := krt.NewStaticCollection[*corev1.Service](nil, nil)
	slices := krt.NewStaticCollection[*discoveryv1.EndpointSlice](nil, nil)
	for name, in := range map[string]Inputs{
		"no Services":       {EndpointSlices: slices},
		"no EndpointSlices": {Services: services},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Build did not panic")
				}
			}()
			Build(in, Options{ClusterDomain: domain})
		})
	}
}
