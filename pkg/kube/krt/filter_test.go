// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Every filter is exercised through Fetch inside NewCollection. The derived
// collection has two inputs: "q" fetches with the filter under test, and
// "sentinel" fetches one key with FilterKey. A "noise" change that must not
// rerun q is made to the sentinel's key, so once the sentinel's output shows
// it, the round that processed it is over; then a matching change is made and
// awaited (always on another key than the noise). The transformation count
// over both steps is exact: the sentinel once plus q once (q twice if the
// noise wrongly, or rightly, reran it).

func showPod(p pod) string { return p.ResourceName() + "@" + p.IP }

func showService(s service) string {
	var sel []string
	for k, v := range s.Selector {
		sel = append(sel, k+"="+v)
	}
	slices.Sort(sel)
	return s.ResourceName() + "{" + strings.Join(sel, ",") + "}"
}

// fetchView derives, for inputs "q" and "sentinel", what Fetch returns from
// src with opts and with FilterKey(sentinelKey) respectively.
func fetchView[T any](stop chan struct{}, src krt.Collection[T], show func(T) string, sentinelKey string,
	opts ...krt.FetchOption,
) krt.Collection[view] {
	qs := krt.NewStaticCollection(nil, []query{{Name: "q"}, {Name: "sentinel"}}, krt.WithStop(stop))
	return krt.NewCollection(qs, func(ctx krt.HandlerContext, q query) *view {
		var got []T
		if q.Name == "q" {
			got = krt.Fetch(ctx, src, opts...)
		} else {
			got = krt.Fetch(ctx, src, krt.FilterKey(sentinelKey))
		}
		items := make([]string, len(got))
		for i, o := range got {
			items[i] = show(o)
		}
		return &view{Name: q.Name, Items: items}
	}, krt.WithStop(stop))
}

type trackCase[T any] struct {
	name       string
	initial    []T
	opts       func(src krt.StaticCollection[T]) []krt.FetchOption
	want       []string // q's output at first
	noise      T        // added or updated; must change what the sentinel shows
	noiseMatch bool     // the noise matches the filter, so q reruns for it
	change     func(src krt.StaticCollection[T])
	wantAfter  []string // q's output after noise and change
}

func runTrackCases[T any](t *testing.T, show func(T) string, cases []trackCase[T]) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stop := newStop(t)
			src := krt.NewStaticCollection(nil, tc.initial, krt.WithStop(stop))
			noiseKey := krt.GetKey(tc.noise)
			c := fetchView(stop, src, show, noiseKey, tc.opts(src)...)
			waitSynced(t, c)
			if diff := cmp.Diff(tc.want, itemsOf(c, "q"), cmpEmpty); diff != "" {
				t.Fatalf("initial fetch (-want +got):\n%s", diff)
			}
			before := krt.Stats(c).Transformations

			src.UpdateObject(tc.noise)
			eventually(t, "the sentinel to see the noise", func() bool {
				return slices.Equal(itemsOf(c, "sentinel"), []string{show(tc.noise)})
			})
			tc.change(src)
			eventually(t, "the matching change to reach q", func() bool {
				return cmp.Equal(tc.wantAfter, itemsOf(c, "q"), cmpEmpty)
			})
			want := uint64(2)
			if tc.noiseMatch {
				want = 3
			}
			if got := krt.Stats(c).Transformations - before; got != want {
				t.Errorf("transformation runs = %d, want %d (noise matches the filter: %v)", got, want, tc.noiseMatch)
			}
		})
	}
}

// cmpEmpty treats nil and empty slices alike.
var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })

func basePods() []pod {
	return []pod{
		{Name: "a", Namespace: "ns", Labels: labels("app", "x"), IP: "1"},
		{Name: "b", Namespace: "ns", Labels: labels("app", "y"), IP: "2"},
		{Name: "c", Namespace: "other", Labels: labels("app", "x"), IP: "3"},
	}
}

func relabel(p pod, kv ...string) pod { p.Labels = labels(kv...); return p }

func podOpts(opts ...krt.FetchOption) func(krt.StaticCollection[pod]) []krt.FetchOption {
	return func(krt.StaticCollection[pod]) []krt.FetchOption { return opts }
}

func TestFilterPodsTracking(t *testing.T) {
	ps := basePods()
	a, b, c := ps[0], ps[1], ps[2]
	d := pod{Name: "d", Namespace: "ns", Labels: labels("app", "y"), IP: "9"} // new, not matching
	update := func(p pod) func(krt.StaticCollection[pod]) {
		return func(s krt.StaticCollection[pod]) { s.UpdateObject(p) }
	}
	byAppIndex := func(s krt.StaticCollection[pod]) []krt.FetchOption {
		return []krt.FetchOption{krt.FilterIndex(krt.NewIndex(s, "app", byApp), "x")}
	}
	runTrackCases(t, showPod, []trackCase[pod]{{
		name: "FilterKey", initial: ps, opts: podOpts(krt.FilterKey("ns/a")),
		want:  []string{"ns/a@1"},
		noise: withIP(b, "22"), change: update(withIP(a, "11")),
		wantAfter: []string{"ns/a@11"},
	}, {
		name: "FilterKeys", initial: ps, opts: podOpts(krt.FilterKeys("ns/a", "other/c")),
		want:   []string{"ns/a@1", "other/c@3"},
		noise:  withIP(b, "22"),
		change: func(s krt.StaticCollection[pod]) { s.DeleteObject("other/c") }, wantAfter: []string{"ns/a@1"},
	}, {
		name: "FilterIndex move in", initial: ps, opts: byAppIndex,
		want:  []string{"ns/a@1", "other/c@3"},
		noise: d, change: update(relabel(b, "app", "x")),
		wantAfter: []string{"ns/a@1", "ns/b@2", "other/c@3"},
	}, {
		name: "FilterIndex move out", initial: ps, opts: byAppIndex,
		want:  []string{"ns/a@1", "other/c@3"},
		noise: withIP(b, "22"), change: update(relabel(a, "app", "y")),
		wantAfter: []string{"other/c@3"},
	}, {
		name: "FilterLabel", initial: ps, opts: podOpts(krt.FilterLabel(labels("app", "x"))),
		want:  []string{"ns/a@1", "other/c@3"},
		noise: d, change: update(relabel(b, "app", "x", "tier", "web")),
		wantAfter: []string{"ns/a@1", "ns/b@2", "other/c@3"},
	}, {
		name: "FilterLabel move out", initial: ps, opts: podOpts(krt.FilterLabel(labels("app", "x"))),
		want:  []string{"ns/a@1", "other/c@3"},
		noise: withIP(b, "22"), change: update(relabel(c, "app", "y")),
		wantAfter: []string{"ns/a@1"},
	}, {
		name: "FilterLabel empty selector matches all", initial: ps, opts: podOpts(krt.FilterLabel(map[string]string{})),
		want:  []string{"ns/a@1", "ns/b@2", "other/c@3"},
		noise: withIP(b, "22"), noiseMatch: true,
		change:    func(s krt.StaticCollection[pod]) { s.DeleteObject("other/c") },
		wantAfter: []string{"ns/a@1", "ns/b@22"},
	}, {
		name: "FilterNamespace", initial: ps, opts: podOpts(krt.FilterNamespace("ns")),
		want:  []string{"ns/a@1", "ns/b@2"},
		noise: withIP(c, "33"), change: update(pod{Name: "d", Namespace: "ns", IP: "4"}),
		wantAfter: []string{"ns/a@1", "ns/b@2", "ns/d@4"},
	}, {
		name: "FilterGeneric", initial: ps,
		opts:  podOpts(krt.FilterGeneric(func(o any) bool { return o.(pod).Labels["app"] == "x" })),
		want:  []string{"ns/a@1", "other/c@3"},
		noise: withIP(b, "22"), change: update(withIP(c, "33")),
		wantAfter: []string{"ns/a@1", "other/c@33"},
	}, {
		name: "FilterNamespace and FilterLabel", initial: ps,
		opts:   podOpts(krt.FilterNamespace("ns"), krt.FilterLabel(labels("app", "x"))),
		want:   []string{"ns/a@1"},
		noise:  withIP(c, "33"), // right label, wrong namespace
		change: update(relabel(b, "app", "x")), wantAfter: []string{"ns/a@1", "ns/b@2"},
	}, {
		name: "namespace index and FilterLabel", initial: ps,
		opts: func(s krt.StaticCollection[pod]) []krt.FetchOption {
			return []krt.FetchOption{krt.FilterIndex(krt.NewNamespaceIndex(s), "ns"), krt.FilterLabel(labels("app", "x"))}
		},
		want:   []string{"ns/a@1"},
		noise:  withIP(c, "33"),
		change: update(relabel(b, "app", "x")), wantAfter: []string{"ns/a@1", "ns/b@2"},
	}, {
		name: "FilterKeys twice intersects", initial: ps,
		opts:  podOpts(krt.FilterKeys("ns/a", "ns/b"), krt.FilterKeys("ns/b", "other/c")),
		want:  []string{"ns/b@2"},
		noise: withIP(a, "11"), change: update(withIP(b, "22")),
		wantAfter: []string{"ns/b@22"},
	}, {
		name: "FilterGeneric and FilterKeys", initial: ps,
		opts: podOpts(krt.FilterKeys("ns/a", "ns/b"),
			krt.FilterGeneric(func(o any) bool { return o.(pod).IP != "2" })),
		want:  []string{"ns/a@1"},
		noise: withIP(c, "2"), change: update(withIP(b, "5")),
		wantAfter: []string{"ns/a@1", "ns/b@5"},
	}})
}

func baseServices() []service {
	return []service{
		{Name: "s1", Namespace: "ns", Selector: labels("app", "x")},
		{Name: "s2", Namespace: "ns", Selector: map[string]string{}},
		{Name: "s3", Namespace: "ns", Selector: labels("app", "y")},
	}
}

func svcOpts(opts ...krt.FetchOption) func(krt.StaticCollection[service]) []krt.FetchOption {
	return func(krt.StaticCollection[service]) []krt.FetchOption { return opts }
}

func TestFilterSelectsTracking(t *testing.T) {
	podLabels := labels("app", "x", "tier", "web")
	setSvc := func(s service) func(krt.StaticCollection[service]) {
		return func(c krt.StaticCollection[service]) { c.UpdateObject(s) }
	}
	runTrackCases(t, showService, []trackCase[service]{{
		name: "FilterSelects", initial: baseServices(), opts: svcOpts(krt.FilterSelects(podLabels)),
		want:      []string{"ns/s1{app=x}", "ns/s2{}"},
		noise:     service{Name: "s5", Namespace: "ns", Selector: labels("app", "z")},
		change:    setSvc(service{Name: "s4", Namespace: "ns", Selector: labels("tier", "web")}),
		wantAfter: []string{"ns/s1{app=x}", "ns/s2{}", "ns/s4{tier=web}"},
	}, {
		name: "FilterSelects selector becomes empty", initial: baseServices(), opts: svcOpts(krt.FilterSelects(podLabels)),
		want:      []string{"ns/s1{app=x}", "ns/s2{}"},
		noise:     service{Name: "s5", Namespace: "ns", Selector: labels("app", "x", "tier", "db")},
		change:    setSvc(service{Name: "s3", Namespace: "ns"}),
		wantAfter: []string{"ns/s1{app=x}", "ns/s2{}", "ns/s3{}"},
	}, {
		name: "FilterSelectsNonEmpty", initial: baseServices(), opts: svcOpts(krt.FilterSelectsNonEmpty(podLabels)),
		want:      []string{"ns/s1{app=x}"},
		noise:     service{Name: "s5", Namespace: "ns"}, // an empty selector selects nothing
		change:    setSvc(service{Name: "s3", Namespace: "ns", Selector: podLabels}),
		wantAfter: []string{"ns/s1{app=x}", "ns/s3{app=x,tier=web}"},
	}, {
		name: "FilterSelectsNonEmpty selector stops matching", initial: baseServices(),
		opts:      svcOpts(krt.FilterSelectsNonEmpty(podLabels)),
		want:      []string{"ns/s1{app=x}"},
		noise:     service{Name: "s2", Namespace: "ns", Selector: labels("app", "q")},
		change:    setSvc(service{Name: "s1", Namespace: "ns", Selector: labels("app", "x", "tier", "db")}),
		wantAfter: []string{},
	}})
}

// TestFilterCombinationsAreAnd checks what one Fetch returns when options are
// combined: "Options combine with AND".
func TestFilterCombinationsAreAnd(t *testing.T) {
	ps := append(basePods(), pod{Name: "d", Namespace: "ns", Labels: labels("app", "x", "tier", "web"), IP: "4"})
	cases := []struct {
		name string
		opts []krt.FetchOption
		want []string
	}{
		{"labels of two selectors", []krt.FetchOption{krt.FilterLabel(labels("app", "x")), krt.FilterLabel(labels("tier", "web"))}, []string{"ns/d@4"}},
		{"conflicting labels", []krt.FetchOption{krt.FilterLabel(labels("app", "x")), krt.FilterLabel(labels("app", "y"))}, nil},
		{"two namespaces", []krt.FetchOption{krt.FilterNamespace("ns"), krt.FilterNamespace("other")}, nil},
		{"key outside namespace", []krt.FetchOption{krt.FilterKey("other/c"), krt.FilterNamespace("ns")}, nil},
		{"two generics", []krt.FetchOption{
			krt.FilterGeneric(func(o any) bool { return o.(pod).Namespace == "ns" }),
			krt.FilterGeneric(func(o any) bool { return o.(pod).IP != "1" }),
		}, []string{"ns/b@2", "ns/d@4"}},
		{"repeated key", []krt.FetchOption{krt.FilterKeys("ns/a", "ns/a")}, []string{"ns/a@1"}},
		{"zero value matches all", []krt.FetchOption{{}}, []string{"ns/a@1", "ns/b@2", "ns/d@4", "other/c@3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stop := newStop(t)
			src := krt.NewStaticCollection(nil, ps, krt.WithStop(stop))
			c := fetchView(stop, src, showPod, "ns/a", tc.opts...)
			waitSynced(t, c)
			if diff := cmp.Diff(tc.want, itemsOf(c, "q"), cmpEmpty); diff != "" {
				t.Errorf("Fetch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFilterLabelMove: a pod whose labels move from service A's selector to
// service B's leaves A's endpoints and joins B's.
func TestFilterLabelMove(t *testing.T) {
	stop := newStop(t)
	p := pod{Name: "p", Namespace: "ns", Labels: labels("app", "a"), IP: "10.0.0.1"}
	pods := krt.NewStaticCollection(nil, []pod{p}, krt.WithStop(stop))
	svcs := krt.NewStaticCollection(nil, []service{
		{Name: "A", Namespace: "ns", Selector: labels("app", "a")},
		{Name: "B", Namespace: "ns", Selector: labels("app", "b")},
	}, krt.WithStop(stop))
	eps := endpointsOf(pods, svcs, stop)
	waitSynced(t, eps)
	ips := func(k string) []string {
		if e := eps.GetKey(k); e != nil {
			return e.IPs
		}
		return nil
	}
	if a, b := ips("ns/A"), ips("ns/B"); !slices.Equal(a, []string{"10.0.0.1"}) || len(b) != 0 {
		t.Fatalf("initial A=%v B=%v", a, b)
	}
	before := krt.Stats(eps).Transformations
	pods.UpdateObject(relabel(p, "app", "b"))
	eventually(t, "the pod to move from A to B", func() bool {
		return len(ips("ns/A")) == 0 && slices.Equal(ips("ns/B"), []string{"10.0.0.1"})
	})
	if got := krt.Stats(eps).Transformations - before; got != 2 {
		t.Errorf("transformation runs = %d, want 2 (A and B)", got)
	}
}

func TestFetchMisusePanics(t *testing.T) {
	pods := krt.NewStaticCollection(nil, []pod{podA})
	mustPanic(t, func() { krt.Fetch[pod](nil, pods) })

	// An option that needs an accessor the fetched type lacks panics, naming
	// the type. The transformation recovers: it runs on the collection's
	// goroutine.
	stop := newStop(t)
	eps := krt.NewStaticCollection(nil, []endpoints{{Name: "e", Namespace: "ns"}}, krt.WithStop(stop))
	cases := map[string]krt.FetchOption{
		"FilterLabel":           krt.FilterLabel(labels("app", "x")),
		"FilterSelects":         krt.FilterSelects(labels("app", "x")),
		"FilterSelectsNonEmpty": krt.FilterSelectsNonEmpty(labels("app", "x")),
		"FilterNamespace":       krt.FilterNamespace("ns"),
	}
	for name, opt := range cases {
		t.Run(name, func(t *testing.T) {
			panics := make(chan string, 1)
			krt.NewCollection(pods, func(ctx krt.HandlerContext, p pod) *pod {
				defer func() {
					msg, _ := recover().(string)
					select {
					case panics <- msg:
					default:
					}
				}()
				krt.Fetch(ctx, eps, opt)
				return &p
			}, krt.WithStop(stop))
			if msg := <-panics; !strings.Contains(msg, "endpoints") {
				t.Errorf("panic %q does not name the type", msg)
			}
		})
	}
}
