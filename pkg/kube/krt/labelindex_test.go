// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// fetchOnce runs one transformation that fetches src with opts and returns
// what it fetched and how many objects of src the fetch examined (tested
// against the filter). src must not change meanwhile.
func fetchOnce[T any](t *testing.T, src krt.Collection[T], show func(T) string, opts ...krt.FetchOption) ([]string, uint64) {
	t.Helper()
	stop := make(chan struct{})
	defer close(stop)
	before := krt.Stats(src).Examined
	s := krt.NewSingleton(func(ctx krt.HandlerContext) *view {
		got := krt.Fetch(ctx, src, opts...)
		items := make([]string, len(got))
		for i, o := range got {
			items[i] = show(o)
		}
		return &view{Name: "q", Items: items}
	}, krt.WithStop(stop))
	waitSynced(t, s.AsCollection())
	return s.Get().Items, krt.Stats(src).Examined - before
}

// labelIndexPods: in namespace a, 100 pods tier=web of which p0-p2 are also
// app=x; p100-p104 are app=x only; namespace b repeats p0-p9 as tier=web,
// app=x.
func labelIndexPods() []pod {
	var out []pod
	for i := range 100 {
		l := labels("tier", "web")
		if i < 3 {
			l["app"] = "x"
		}
		out = append(out, pod{Name: fmt.Sprintf("p%d", i), Namespace: "a", Labels: l, IP: fmt.Sprint(i)})
	}
	for i := 100; i < 105; i++ {
		out = append(out, pod{Name: fmt.Sprintf("p%d", i), Namespace: "a", Labels: labels("app", "x"), IP: fmt.Sprint(i)})
	}
	for i := range 10 {
		out = append(out, pod{Name: fmt.Sprintf("p%d", i), Namespace: "b", Labels: labels("tier", "web", "app", "x"), IP: fmt.Sprint(i)})
	}
	return out
}

// A FilterLabel fetch reads only the bucket of its rarest pair in the
// namespace, and sees label changes on the fetched objects at once: a pod
// that loses the pair leaves the bucket, one that gains it enters.
func TestFetchLabelExaminesRarestPair(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, labelIndexPods(), krt.WithStop(stop))
	byNS := krt.NewNamespaceIndex(pods)
	webX := labels("tier", "web", "app", "x")
	check := func(step string, want []string, wantExamined uint64, opts ...krt.FetchOption) {
		t.Helper()
		got, examined := fetchOnce[pod](t, pods, showPod, opts...)
		if diff := cmp.Diff(want, got, cmpEmpty); diff != "" {
			t.Errorf("%s: fetched (-want +got):\n%s", step, diff)
		}
		if examined != wantExamined {
			t.Errorf("%s: examined %d objects, want %d (the rarest pair's bucket)", step, examined, wantExamined)
		}
	}
	// app=x has 8 pods in a, tier=web 100: the app=x bucket is read.
	check("namespace filter", []string{"a/p0@0", "a/p1@1", "a/p2@2"}, 8,
		krt.FilterNamespace("a"), krt.FilterLabel(webX))
	// Through a namespace index the same bucket is read, not the namespace.
	got, examined := fetchOnce[pod](t, pods, showPod)
	if len(got) != 115 || examined != 115 {
		t.Fatalf("unfiltered fetch: got %d objects, examined %d, want 115 and 115", len(got), examined)
	}
	stopIdx := make(chan struct{})
	// Read the counter before the singleton exists: it may compute at once.
	before := krt.Stats(pods).Examined
	s := krt.NewSingleton(func(ctx krt.HandlerContext) *view {
		return &view{Name: "q", Items: keysOf(byNS.Fetch(ctx, "a", krt.FilterLabel(webX)))}
	}, krt.WithStop(stopIdx))
	waitSynced(t, s.AsCollection())
	if diff := cmp.Diff([]string{"a/p0", "a/p1", "a/p2"}, s.Get().Items); diff != "" {
		t.Errorf("namespace index fetch (-want +got):\n%s", diff)
	}
	if n := krt.Stats(pods).Examined - before; n != 8 {
		t.Errorf("namespace index fetch examined %d objects, want 8", n)
	}
	close(stopIdx)
	// Without a namespace: the rarest bucket of each namespace (8 + 10).
	check("all namespaces", []string{"a/p0@0", "a/p1@1", "a/p2@2", "b/p0@0", "b/p1@1", "b/p2@2",
		"b/p3@3", "b/p4@4", "b/p5@5", "b/p6@6", "b/p7@7", "b/p8@8", "b/p9@9"}, 18, krt.FilterLabel(webX))

	// p1 loses app=x (its tier=web entry stays); p50 gains it.
	pods.UpdateObject(pod{Name: "p1", Namespace: "a", Labels: labels("tier", "web", "app", "y"), IP: "1b"})
	pods.UpdateObject(pod{Name: "p50", Namespace: "a", Labels: labels("tier", "web", "app", "x"), IP: "50b"})
	check("after label changes", []string{"a/p0@0", "a/p2@2", "a/p50@50b"}, 8,
		krt.FilterNamespace("a"), krt.FilterLabel(webX))
	check("the pair p1 moved to", []string{"a/p1@1b"}, 1, krt.FilterNamespace("a"), krt.FilterLabel(labels("app", "y")))
	// An update keeping the labels replaces the object in its buckets.
	pods.UpdateObject(pod{Name: "p0", Namespace: "a", Labels: labels("tier", "web", "app", "x"), IP: "0b"})
	check("after an IP change", []string{"a/p0@0b", "a/p2@2", "a/p50@50b"}, 8,
		krt.FilterNamespace("a"), krt.FilterLabel(webX))
	// A pod moved to another namespace leaves the first one's buckets.
	pods.DeleteObject("a/p2")
	pods.UpdateObject(pod{Name: "p2", Namespace: "b", Labels: labels("app", "z"), IP: "2c"})
	check("after a delete", []string{"a/p0@0b", "a/p50@50b"}, 7, krt.FilterNamespace("a"), krt.FilterLabel(webX))
	// A pair nobody has: nothing is read.
	check("unknown pair", nil, 0, krt.FilterNamespace("a"), krt.FilterLabel(labels("app", "nope", "tier", "web")))
}

// A FilterSelects fetch reads only the objects filed under a pair of the
// given labels (plus those with an empty selector), and follows selector
// changes.
func TestFetchSelectsExaminesFiledPairs(t *testing.T) {
	stop := newStop(t)
	var svcs []service
	for i := range 50 {
		svcs = append(svcs, service{Name: fmt.Sprintf("s%d", i), Namespace: "a", Selector: labels("app", fmt.Sprint(i))})
	}
	svcs = append(svcs,
		service{Name: "both", Namespace: "a", Selector: labels("app", "7", "tier", "web")},
		service{Name: "other-tier", Namespace: "a", Selector: labels("app", "7", "tier", "db")},
		service{Name: "empty", Namespace: "a"},
		service{Name: "s7", Namespace: "b", Selector: labels("app", "7")},
	)
	src := krt.NewStaticCollection(nil, svcs, krt.WithStop(stop))
	check := func(step string, want []string, wantExamined uint64, opts ...krt.FetchOption) {
		t.Helper()
		got, examined := fetchOnce[service](t, src, showService, opts...)
		if diff := cmp.Diff(want, got, cmpEmpty); diff != "" {
			t.Errorf("%s: fetched (-want +got):\n%s", step, diff)
		}
		if examined != wantExamined {
			t.Errorf("%s: examined %d objects, want %d", step, examined, wantExamined)
		}
	}
	pod7 := labels("app", "7", "tier", "web")
	// Filed under app=7 (the smallest key): s7, both, other-tier.
	check("non-empty", []string{"a/both{app=7,tier=web}", "a/s7{app=7}"}, 3,
		krt.FilterNamespace("a"), krt.FilterSelectsNonEmpty(pod7))
	check("with empty", []string{"a/both{app=7,tier=web}", "a/empty{}", "a/s7{app=7}"}, 4,
		krt.FilterNamespace("a"), krt.FilterSelects(pod7))
	check("all namespaces", []string{"a/both{app=7,tier=web}", "a/s7{app=7}", "b/s7{app=7}"}, 4,
		krt.FilterSelectsNonEmpty(pod7))

	src.UpdateObject(service{Name: "s7", Namespace: "a", Selector: labels("app", "8")})
	src.UpdateObject(service{Name: "other-tier", Namespace: "a", Selector: labels("tier", "web")})
	// app=7 now files only "both"; tier=web files "other-tier".
	check("after selector changes", []string{"a/both{app=7,tier=web}", "a/other-tier{tier=web}"}, 2,
		krt.FilterNamespace("a"), krt.FilterSelectsNonEmpty(pod7))
}

// With an index other than the namespace index, the smaller of the index
// bucket and the label bucket is read; the result is the same.
func TestFetchLabelWithIndexReadsSmallerBucket(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, labelIndexPods(), krt.WithStop(stop))
	byIP := krt.NewIndex(pods, "ip", func(p pod) []string { return []string{p.IP} })
	byTier := krt.NewIndex(pods, "tier", func(p pod) []string { return []string{p.Labels["tier"]} })
	run := func(idx krt.Index[string, pod], k string, sel map[string]string) ([]string, uint64) {
		s := make(chan struct{})
		defer close(s)
		before := krt.Stats(pods).Examined
		c := krt.NewSingleton(func(ctx krt.HandlerContext) *view {
			return &view{Name: "q", Items: keysOf(idx.Fetch(ctx, k, krt.FilterLabel(sel)))}
		}, krt.WithStop(s))
		waitSynced(t, c.AsCollection())
		return c.Get().Items, krt.Stats(pods).Examined - before
	}
	// IP "1" is held by a/p1 and b/p1: the index bucket (2) beats app=x (8+10).
	got, n := run(byIP, "1", labels("app", "x"))
	if diff := cmp.Diff([]string{"a/p1", "b/p1"}, got); diff != "" || n != 2 {
		t.Errorf("ip index: got %v examined %d, want [a/p1 b/p1] and 2 (%s)", got, n, diff)
	}
	// tier=web holds 110 pods: the app=x buckets (8 in a, 10 in b) are read.
	got, n = run(byTier, "web", labels("app", "x"))
	want := []string{"a/p0", "a/p1", "a/p2", "b/p0", "b/p1", "b/p2", "b/p3", "b/p4", "b/p5", "b/p6", "b/p7", "b/p8", "b/p9"}
	if diff := cmp.Diff(want, got); diff != "" || n != 18 {
		t.Errorf("tier index: examined %d, want 18; fetched (-want +got):\n%s", n, diff)
	}
}
