// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/test/seed"
)

// TestTranslatorFollowsChanges: after every step of a random sequence of
// route, Service and Gateway changes, the Models collection of one
// pipeline that saw every step holds what a pipeline built from scratch on
// the current objects holds. The Models collection keeps each unchanged route's
// *model.Route across steps (routeModel); a route whose model should have
// changed but kept its old pointer shows up here as a difference that
// never goes away.
func TestTranslatorFollowsChanges(t *testing.T) {
	for _, s := range []uint64{1, 2} {
		t.Run(fmt.Sprint("seed ", s), func(t *testing.T) { runTranslatorSteps(t, s, 60) })
	}
}

func stepService(name string) *corev1.Service {
	svc := seed.EPPService()
	svc.Name = name
	svc.Spec.Ports[0].Port, svc.Spec.Ports[0].TargetPort = 8000, intstr.FromInt32(8000)
	return svc
}

func runTranslatorSteps(t *testing.T, s uint64, steps int) {
	rnd := rand.New(rand.NewPCG(s, 0))
	const routes = 6
	services := map[string]*corev1.Service{"svc-a": stepService("svc-a"), "svc-b": stepService("svc-b")}
	gateways := []*gwv1.Gateway{benchGateway(0), benchGateway(1)}
	type routeSrc struct {
		gw      int
		path    string
		hosts   []gwv1.Hostname
		backend string
		present bool
	}
	src := make([]routeSrc, routes)
	for j := range src {
		src[j] = routeSrc{gw: j % 2, path: "/", backend: "svc-a", present: true}
	}
	route := func(j int) *gwv1.HTTPRoute {
		r := benchRoute(src[j].gw, j, src[j].path)
		r.Name = fmt.Sprintf("r-%d", j)
		r.Spec.Hostnames = src[j].hosts
		r.Spec.Rules[0].BackendRefs[0].Name = gwv1.ObjectName(src[j].backend)
		r.Spec.Rules[0].BackendRefs[0].Port = ptr.To(gwv1.PortNumber(8000))
		return r
	}
	objects := func() []any {
		out := []any{seed.GatewayClassObject()}
		for _, gw := range gateways {
			out = append(out, gw)
		}
		for _, name := range []string{"svc-a", "svc-b"} {
			if services[name] != nil {
				out = append(out, services[name])
			}
		}
		for j := range src {
			if src[j].present {
				out = append(out, route(j))
			}
		}
		return out
	}
	hostSets := [][]gwv1.Hostname{nil, {"a.example.com"}, {"a.example.com", "b.example.com"}, {"*.example.com"}}
	p := newPipeline(t, false, objects()...)
	for step := range steps {
		j := rnd.IntN(routes)
		var what string
		routeChanged := true
		switch n := rnd.IntN(8); n {
		case 0:
			src[j].path = fmt.Sprintf("/v%d", step)
			what = "path of " + fmt.Sprint(j)
		case 1:
			src[j].gw = 1 - src[j].gw
			what = "parent of " + fmt.Sprint(j)
		case 2:
			src[j].hosts = hostSets[rnd.IntN(len(hostSets))]
			what = "hostnames of " + fmt.Sprint(j)
		case 3:
			src[j].present = !src[j].present
			what = "presence of " + fmt.Sprint(j)
		case 4:
			src[j].backend = map[string]string{"svc-a": "svc-b", "svc-b": "svc-a"}[src[j].backend]
			what = "backend of " + fmt.Sprint(j)
		case 5, 6:
			name := []string{"svc-a", "svc-b"}[rnd.IntN(2)]
			if services[name] != nil {
				services[name] = nil
				p.services.DeleteObject(seed.Namespace + "/" + name)
			} else {
				services[name] = stepService(name)
				p.add(services[name])
			}
			what = "Service " + name
			routeChanged = false
		default:
			i := rnd.IntN(len(gateways))
			gw := gateways[i].DeepCopy()
			if gw.Spec.Listeners[0].Hostname == nil {
				gw.Spec.Listeners[0].Hostname = ptr.To(gwv1.Hostname("*.example.com"))
			} else {
				gw.Spec.Listeners[0].Hostname = nil
			}
			gateways[i] = gw
			p.add(gw)
			what = "listener hostname of gw-" + fmt.Sprint(i)
			routeChanged = false
		}
		if routeChanged {
			if src[j].present {
				p.add(route(j))
			} else {
				p.http.DeleteObject(seed.Namespace + "/" + fmt.Sprintf("r-%d", j))
			}
		}
		fresh := newPipeline(t, false, objects()...)
		for i := range gateways {
			key := seed.GatewayNamespace + fmt.Sprintf("/gw-%d", i)
			diff := func() string { return cmp.Diff(fresh.out.Models.GetKey(key), p.out.Models.GetKey(key)) }
			p.eventually(fmt.Sprintf("seed %d step %d (%s): %s as built from scratch", s, step, what, key),
				func() bool { return diff() == "" }, func() string { return "(-from scratch +incremental):\n" + diff() })
		}
	}
}
