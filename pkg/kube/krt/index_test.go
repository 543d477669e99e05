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

func byApp(p pod) []string {
	if app, ok := p.Labels["app"]; ok {
		return []string{app}
	}
	return nil
}

func lookupKeys[K comparable](idx krt.Index[K, pod], k K) []string { return keysOf(idx.Lookup(k)) }

func TestIndexFollowsChanges(t *testing.T) {
	pods := krt.NewStaticCollection(nil, []pod{podA, podB})
	idx := krt.NewIndex(pods, "app", byApp)
	check := func(step string, x, y []string) {
		t.Helper()
		if diff := cmp.Diff(x, lookupKeys(idx, "x")); diff != "" {
			t.Errorf("%s: Lookup(x) (-want +got):\n%s", step, diff)
		}
		if diff := cmp.Diff(y, lookupKeys(idx, "y")); diff != "" {
			t.Errorf("%s: Lookup(y) (-want +got):\n%s", step, diff)
		}
	}
	check("initial", []string{"ns/a"}, []string{"ns/b"})

	pods.UpdateObject(podC)
	check("add", []string{"ns/a", "ns/c"}, []string{"ns/b"})

	movedA := withIP(podA, "10.0.0.1")
	movedA.Labels = labels("app", "y")
	pods.UpdateObject(movedA)
	check("move x->y", []string{"ns/c"}, []string{"ns/a", "ns/b"})
	if got := idx.Lookup("y"); got[0].IP != "10.0.0.1" || got[0].Labels["app"] != "y" {
		t.Errorf("Lookup returned a stale object: %+v", got[0])
	}

	pods.UpdateObject(withIP(podC, "10.0.0.33")) // update in place
	if got := idx.Lookup("x"); len(got) != 1 || got[0].IP != "10.0.0.33" {
		t.Errorf("Lookup(x) after in-place update = %+v", got)
	}

	pods.DeleteObject("ns/b")
	noLabels := pod{Name: "d", Namespace: "ns"}
	pods.UpdateObject(noLabels)
	check("delete", []string{"ns/c"}, []string{"ns/a"})
	if got := idx.Lookup("missing"); len(got) != 0 {
		t.Errorf("Lookup(missing) = %v, want empty", got)
	}
}

func TestIndexMultiKeyAndSorted(t *testing.T) {
	// Every pod is filed under each of its label values; keys of other types
	// than string work too.
	ps := []pod{
		{Name: "z", Namespace: "ns", Labels: labels("app", "x", "tier", "web")},
		{Name: "m", Namespace: "ns", Labels: labels("tier", "web")},
		{Name: "a", Namespace: "ns", Labels: labels("app", "web")},
		{Name: "b", Namespace: "aa", Labels: labels("tier", "web")},
		{Name: "e", Namespace: "ns", Labels: labels("app", "web", "tier", "web")}, // "web" twice
	}
	pods := krt.NewStaticCollection(nil, ps)
	byValue := krt.NewIndex(pods, "values", func(p pod) []string {
		var out []string
		for _, v := range p.Labels {
			out = append(out, v)
		}
		return out
	})
	// Filed once under each key, even when extract repeats a key; both for
	// objects present when the index is built and for later ones.
	pods.UpdateObject(pod{Name: "f", Namespace: "ns", Labels: labels("role", "web", "tier", "web")})
	if diff := cmp.Diff([]string{"aa/b", "ns/a", "ns/e", "ns/f", "ns/m", "ns/z"}, lookupKeys(byValue, "web")); diff != "" {
		t.Errorf("Lookup(web) (-want +got):\n%s", diff)
	}
	pods.UpdateObject(pod{Name: "e", Namespace: "ns", Labels: labels("app", "web", "tier", "web"), IP: "new"})
	if got := byValue.Lookup("web"); slices.ContainsFunc(got, func(p pod) bool { return p.Name == "e" && p.IP != "new" }) {
		t.Errorf("Lookup(web) after updating ns/e still has its old version: %+v", got)
	}
	pods.DeleteObject("ns/e")
	if got := lookupKeys(byValue, "web"); slices.Contains(got, "ns/e") {
		t.Errorf("Lookup(web) after deleting ns/e = %v, still has it", got)
	}
	if diff := cmp.Diff([]string{"ns/z"}, lookupKeys(byValue, "x")); diff != "" {
		t.Errorf("Lookup(x) (-want +got):\n%s", diff)
	}

	byCount := krt.NewIndex(pods, "count", func(p pod) []int { return []int{len(p.Labels)} })
	if diff := cmp.Diff([]string{"aa/b", "ns/a", "ns/m"}, lookupKeys(byCount, 1)); diff != "" {
		t.Errorf("Lookup(1) (-want +got):\n%s", diff)
	}
}

func TestNamespaceIndex(t *testing.T) {
	pods := krt.NewStaticCollection(nil, []pod{
		{Name: "b", Namespace: "one"}, {Name: "a", Namespace: "one"}, {Name: "a", Namespace: "two"},
	})
	idx := krt.NewNamespaceIndex(pods)
	if diff := cmp.Diff([]string{"one/a", "one/b"}, lookupKeys(idx, "one")); diff != "" {
		t.Errorf("Lookup(one) (-want +got):\n%s", diff)
	}
	pods.DeleteObject("two/a")
	if got := lookupKeys(idx, "two"); len(got) != 0 {
		t.Errorf("Lookup(two) after delete = %v", got)
	}

	// A type without a namespace cannot be indexed by namespace.
	msg := mustPanic(t, func() { krt.NewNamespaceIndex(krt.NewStaticCollection[endpoints](nil, nil)) })
	if !strings.Contains(msg, "endpoints") {
		t.Errorf("panic %q does not name the type", msg)
	}
}

func TestIndexSameNameIsSameIndex(t *testing.T) {
	pods := krt.NewStaticCollection(nil, []pod{podA, podB})
	first := krt.NewIndex(pods, "app", byApp)
	// The second extract is ignored: the first index is returned.
	second := krt.NewIndex(pods, "app", func(pod) []string { return []string{"other"} })
	if first != second {
		t.Error("NewIndex with the same name returned a different index")
	}
	if diff := cmp.Diff([]string{"ns/a"}, lookupKeys(second, "x")); diff != "" {
		t.Errorf("Lookup through the second handle (-want +got):\n%s", diff)
	}
	// Another collection's index of the same name is its own.
	others := krt.NewStaticCollection(nil, []pod{podC})
	other := krt.NewIndex(others, "app", byApp)
	if diff := cmp.Diff([]string{"ns/c"}, lookupKeys(other, "x")); diff != "" {
		t.Errorf("other collection's Lookup(x) (-want +got):\n%s", diff)
	}
}

func TestIndexFetchTracksMoves(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA, podB}, krt.WithStop(stop))
	idx := krt.NewIndex(pods, "app", byApp)
	apps := krt.NewStaticCollection(nil, []query{{Name: "x"}, {Name: "y"}}, krt.WithStop(stop))
	members := krt.NewCollection(apps, func(ctx krt.HandlerContext, q query) *view {
		return &view{Name: q.Name, Items: keysOf(idx.Fetch(ctx, q.Name))}
	}, krt.WithStop(stop))
	waitSynced(t, members)
	if x, y := itemsOf(members, "x"), itemsOf(members, "y"); !slices.Equal(x, []string{"ns/a"}) || !slices.Equal(y, []string{"ns/b"}) {
		t.Fatalf("initial x=%v y=%v, want [ns/a] [ns/b]", x, y)
	}
	moved := podA
	moved.Labels = labels("app", "y")
	pods.UpdateObject(moved)
	eventually(t, "a to move to y", func() bool {
		return len(itemsOf(members, "x")) == 0 && slices.Equal(itemsOf(members, "y"), []string{"ns/a", "ns/b"})
	})
}

func TestFilterIndexOfAnotherCollectionPanics(t *testing.T) {
	stop := newStop(t)
	pods := krt.NewStaticCollection(nil, []pod{podA}, krt.WithStop(stop))
	others := krt.NewStaticCollection(nil, []pod{podB}, krt.WithStop(stop))
	foreign := krt.NewIndex(others, "foreign-app", byApp)
	panics := make(chan string, 1)
	krt.NewCollection(pods, func(ctx krt.HandlerContext, p pod) *pod {
		// Recover here: the transformation runs on the collection's goroutine.
		defer func() {
			msg, _ := recover().(string)
			select {
			case panics <- msg:
			default:
			}
		}()
		krt.Fetch(ctx, pods, krt.FilterIndex(foreign, "x"))
		return &p
	}, krt.WithStop(stop), krt.WithName("uses-foreign-index"))
	msg := <-panics
	if msg == "" {
		t.Fatal("Fetch with another collection's index did not panic")
	}
	if !strings.Contains(msg, "foreign-app") {
		t.Errorf("panic %q does not name the index", msg)
	}
}
