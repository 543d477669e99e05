// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/cputime"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// BenchmarkRouteWrite is the controller's part of one HTTPRoute write
// (tests/integration/xdsbench measures the whole write through a real
// cluster): from the route's update in the
// input collection to the Gateway's new model.Gateway out of the
// Translator collection, with 1,000 routes on one Gateway and with 10,000
// routes on 10 Gateways (1,000 each). Each write changes the path of one
// route of the first Gateway. cpu-ms/op is the process's CPU time per write
// (all collections' work, the Gateway's status recomputation included,
// which runs beside the Translator's).
func BenchmarkRouteWrite(b *testing.B) {
	for _, size := range []struct{ gateways, perGateway int }{{1, 1000}, {10, 1000}} {
		b.Run(fmt.Sprintf("routes=%d/gateways=%d", size.gateways*size.perGateway, size.gateways), func(b *testing.B) {
			benchRouteWrite(b, size.gateways, size.perGateway)
		})
	}
}

func benchGateway(i int) *gwv1.Gateway {
	gw := seed.Gateway()
	gw.Name = fmt.Sprintf("gw-%d", i)
	return gw
}

// benchRoute is route j of Gateway i: its own hostname, one rule with path
// prefix path to the EPP Service of the seed (any Service will do).
func benchRoute(i, j int, path string) *gwv1.HTTPRoute {
	prefix := gwv1.PathMatchPathPrefix
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: fmt.Sprintf("r-%d-%d", i, j), Generation: 1},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
				Namespace: ptr.To(gwv1.Namespace(seed.GatewayNamespace)),
				Name:      gwv1.ObjectName(fmt.Sprintf("gw-%d", i)),
			}}},
			Hostnames: []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("r-%d-%d.example.com", i, j))},
			Rules: []gwv1.HTTPRouteRule{{
				Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: ptr.To(path)}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Name: seed.EPPName, Port: ptr.To(gwv1.PortNumber(seed.EPPPort)),
				}}}},
			}},
		},
	}
}

// routePath is the path of the first rule of the route named name in gw's
// first listener ("" when it is not there).
func routePath(gw *model.Gateway, name string) string {
	if len(gw.Listeners) == 0 {
		return ""
	}
	for _, r := range gw.Listeners[0].Routes {
		if r.Name == name && len(r.Rules) > 0 && r.Rules[0].HTTP != nil {
			return *r.Rules[0].HTTP.Matches[0].Path.Value
		}
	}
	return ""
}

func benchRouteWrite(b *testing.B, gateways, perGateway int) {
	objs := []any{seed.GatewayClassObject(), seed.EPPService()}
	for i := range gateways {
		objs = append(objs, benchGateway(i))
		for j := range perGateway {
			objs = append(objs, benchRoute(i, j, "/"))
		}
	}
	p := newPipeline(b, false, objs...)
	first := seed.GatewayNamespace + "/gw-0"
	p.eventually("every route in the Translator's model", func() bool {
		gw := p.out.Translator.GetKey(first)
		return gw != nil && len(gw.Listeners) == 1 && len(gw.Listeners[0].Routes) == perGateway
	}, func() string { return fmt.Sprint(p.out.Translator.GetKey(first)) })

	// want is the route and path the current write waits for.
	type want struct{ route, path string }
	var waiting atomic.Pointer[want]
	done := make(chan struct{}, 1)
	reg := p.out.Translator.Register(func(ev krt.Event[model.Gateway]) {
		w := waiting.Load()
		if ev.New == nil || w == nil || ev.New.Namespace+"/"+ev.New.Name != first {
			return
		}
		if routePath(ev.New, w.route) == w.path {
			waiting.Store(nil)
			done <- struct{}{}
		}
	})
	defer reg.UnregisterHandler()

	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process(b)
	for n := range b.N {
		j := n % perGateway
		w := &want{route: fmt.Sprintf("r-0-%d", j), path: fmt.Sprintf("/v%d", n)}
		r := benchRoute(0, j, w.path)
		r.Generation = int64(n + 2)
		waiting.Store(w)
		p.http.UpdateObject(r)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			b.Fatalf("write %d: %s %s did not reach the Translator's model", n, w.route, w.path)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Process(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
