// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package endpointslice

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

// inputs are the static collections a test feeds.
type inputs struct {
	stop     chan struct{}
	services krt.StaticCollection[*corev1.Service]
	pods     krt.StaticCollection[*corev1.Pod]
	slices   krt.StaticCollection[*discoveryv1.EndpointSlice]
}

func newInputs(t *testing.T, svcs []*corev1.Service, pods []*corev1.Pod, slices []*discoveryv1.EndpointSlice) *inputs {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return &inputs{
		stop:     stop,
		services: krt.NewStaticCollection(nil, svcs, krt.WithStop(stop)),
		pods:     krt.NewStaticCollection(nil, pods, krt.WithStop(stop)),
		slices:   krt.NewStaticCollection(nil, slices, krt.WithStop(stop)),
	}
}

func waitSynced(t *testing.T, c krt.Collection[*discoveryv1.EndpointSlice]) {
	t.Helper()
	timeout := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(timeout) })
	defer timer.Stop()
	if !c.WaitUntilSynced(timeout) {
		t.Fatal("collection did not sync")
	}
}

// ofService returns c's slices labelled with service name svc.
func ofService(c krt.Collection[*discoveryv1.EndpointSlice], svc string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, s := range c.List() {
		if s.Labels[discoveryv1.LabelServiceName] == svc {
			out = append(out, s)
		}
	}
	return out
}

func ownSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "own-manual", Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: "own"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.1"}}},
	}
}

// fixture: Services a (app=a), b (app=b), own (app=own, with a slice of its
// own) and nosel (no selector), and one ready pod for each selector.
func fixture(t *testing.T) *inputs {
	return newInputs(t,
		[]*corev1.Service{
			newService("a", selector("app", "a")),
			newService("b", selector("app", "b")),
			newService("own", selector("app", "own")),
			newService("nosel", func(s *corev1.Service) { s.Spec.Selector = nil }),
		},
		[]*corev1.Pod{
			newPod("a-0", 0, withLabels("app", "a")),
			newPod("b-0", 1, withLabels("app", "b")),
			newPod("own-0", 2, withLabels("app", "own")),
		},
		[]*discoveryv1.EndpointSlice{ownSlice()},
	)
}

func TestCollection(t *testing.T) {
	in := fixture(t)
	c := Collection(in.services, in.pods, in.slices, krt.WithStop(in.stop))
	waitSynced(t, c)

	// The Service with its own slice keeps it, untouched, and gets nothing
	// computed; nosel gets nothing; a and b get one slice each.
	own := ofService(c, "own")
	given := in.slices.GetKey(ns + "/own-manual")
	if len(own) != 1 || given == nil || own[0] != *given {
		t.Fatalf("own's slices = %+v, want exactly the given one (same object)", own)
	}
	if got := ofService(c, "nosel"); len(got) != 0 {
		t.Errorf("nosel got slices %+v", got)
	}
	if d := cmp.Diff([]string{"a-0"}, endpointNames(ofService(c, "a"))); d != "" {
		t.Errorf("a's endpoints (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"b-0"}, endpointNames(ofService(c, "b"))); d != "" {
		t.Errorf("b's endpoints (-want +got):\n%s", d)
	}

	// Adding a ready pod for a: one batch with one event, the update of a's
	// slice.
	var mu sync.Mutex
	var batches [][]krt.Event[*discoveryv1.EndpointSlice]
	reg := c.RegisterBatch(func(evs []krt.Event[*discoveryv1.EndpointSlice]) {
		mu.Lock()
		defer mu.Unlock()
		batches = append(batches, evs)
	}, false)
	defer reg.UnregisterHandler()
	aSlice := mustOne(t, ofService(c, "a")).Name
	in.pods.UpdateObject(newPod("a-1", 3, withLabels("app", "a")))
	poll.Until(t, 10*time.Second, "a's slice has a-1", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(batches) > 0
	})
	mu.Lock()
	first := batches[0]
	mu.Unlock()
	if len(first) != 1 || first[0].Event != krt.EventUpdate || first[0].New == nil || (*first[0].New).Name != aSlice {
		t.Fatalf("first batch = %+v, want one update of %s", first, aSlice)
	}
	if d := cmp.Diff([]string{"a-0", "a-1"}, endpointNames(ofService(c, "a"))); d != "" {
		t.Errorf("a's endpoints (-want +got):\n%s", d)
	}

	// a gets a slice of its own: its computed slice goes away.
	manual := ownSlice()
	manual.Name, manual.Labels[discoveryv1.LabelServiceName] = "a-manual", "a"
	in.slices.UpdateObject(manual)
	poll.Until(t, 10*time.Second, "a's computed slice withdrawn", func() bool {
		got := ofService(c, "a")
		return len(got) == 1 && got[0].Name == "a-manual"
	})
}

// TestRecomputesOnlyAffectedService counts transformation runs of the
// computed collection: a Pod change recomputes only the Service selecting
// it, and a Service with a slice of its own is not recomputed by its Pods.
func TestRecomputesOnlyAffectedService(t *testing.T) {
	in := fixture(t)
	c := computed(in.services, in.pods, in.slices, krt.WithStop(in.stop))
	waitSynced(t, c)
	before := krt.Stats(c).Transformations

	// Queued in order: the own pod's change is processed no later than a's.
	in.pods.UpdateObject(newPod("own-1", 4, withLabels("app", "own")))
	in.pods.UpdateObject(newPod("a-1", 3, withLabels("app", "a")))
	poll.Until(t, 10*time.Second, "a's slice has a-1", func() bool {
		return len(endpointNames(ofService(c, "a"))) == 2
	})
	if runs := krt.Stats(c).Transformations - before; runs != 1 {
		t.Errorf("transformation runs = %d, want 1 (Service a only)", runs)
	}

	// a-0 turns not ready: a alone is recomputed and its endpoint changes.
	before = krt.Stats(c).Transformations
	in.pods.UpdateObject(newPod("a-0", 0, withLabels("app", "a"), notReady))
	poll.Until(t, 10*time.Second, "a-0 not ready", func() bool {
		s := ofService(c, "a")
		return len(s) == 1 && !*s[0].Endpoints[0].Conditions.Ready
	})
	if runs := krt.Stats(c).Transformations - before; runs != 1 {
		t.Errorf("transformation runs = %d, want 1 (Service a only)", runs)
	}
}

// TestShadowService: a headless Service shaped like an InferencePool's
// shadow Service, two ports to two target ports, gets one slice with both.
func TestShadowService(t *testing.T) {
	app := "http"
	shadow := newService("pool-ip-0123abcd", headless, selector("app", "vllm"), ports(
		corev1.ServicePort{Name: "http-0", Protocol: corev1.ProtocolTCP, Port: 54321, TargetPort: intstr.FromInt32(8000), AppProtocol: &app},
		corev1.ServicePort{Name: "http-1", Protocol: corev1.ProtocolTCP, Port: 54322, TargetPort: intstr.FromInt32(8001), AppProtocol: &app},
	))
	in := newInputs(t, []*corev1.Service{shadow},
		[]*corev1.Pod{newPod("vllm-0", 0, withLabels("app", "vllm")), newPod("vllm-1", 1, withLabels("app", "vllm"), notReady)},
		nil)
	c := Collection(in.services, in.pods, in.slices, krt.WithStop(in.stop))
	waitSynced(t, c)
	s := mustOne(t, c.List())
	if d := cmp.Diff([]string{"http-0:8000/TCP", "http-1:8001/TCP"}, portSummary(s)); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
	for _, p := range s.Ports {
		if p.AppProtocol == nil || *p.AppProtocol != "http" {
			t.Errorf("port %s appProtocol = %v, want http", *p.Name, p.AppProtocol)
		}
	}
	if d := cmp.Diff([]string{"vllm-0", "vllm-1"}, endpointNames([]*discoveryv1.EndpointSlice{s})); d != "" {
		t.Errorf("endpoints (-want +got):\n%s", d)
	}
	if s.AddressType != discoveryv1.AddressTypeIPv4 || s.Labels[corev1.IsHeadlessService] != "" {
		t.Errorf("addressType %s labels %v, want IPv4 and the headless label", s.AddressType, s.Labels)
	}
}
