// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// The model test drives a pipeline that uses every kind of collection and
// filter with random changes, and at quiescent points compares every derived
// collection with a from-scratch recomputation of the same functions over the
// current inputs, and with the state rebuilt from its event stream.

var (
	modelSeed  = flag.Uint64("model.seed", 0, "run only this seed of TestModel")
	modelRuns  = flag.Int("model.runs", 2000, "number of random sequences TestModel runs")
	modelSteps = flag.Int("model.steps", 24, "operations per sequence")
)

// chooser is the source of decisions: a seeded PRNG or fuzzer bytes.
type chooser interface {
	intn(n int) int
	done() bool
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }
func (c randChooser) done() bool     { return false }

// byteChooser reads decisions from fuzzer input; it is done when exhausted.
type byteChooser struct {
	b []byte
	i int
}

func (c *byteChooser) intn(n int) int {
	if c.i >= len(c.b) {
		c.i++
		return 0
	}
	v := int(c.b[c.i]) % n
	c.i++
	return v
}
func (c *byteChooser) done() bool { return c.i >= len(c.b) }

// Model types.

type cfg struct{ Suffix string }

type mWorkload struct {
	Key      string
	IP       string
	Services []string
	Suffix   string
}

func (w mWorkload) ResourceName() string { return w.Key }

type total struct{ IPs, Workloads int }

type member struct {
	Key string // pod key
	Svc string // service key that claimed it
}

func (m member) ResourceName() string { return m.Key }

type shadow struct {
	Key   string
	Count int
}

func (s shadow) ResourceName() string { return s.Key }

type svcStatus struct{ Endpoints int }

// modelPipeline is the system under test.
type modelPipeline struct {
	pods, extra krt.StaticCollection[pod]
	svcs        krt.StaticCollection[service]
	config      krt.StaticSingleton[cfg]
	all         krt.Collection[pod]
	eps         krt.Collection[endpoints]
	wls         krt.Collection[mWorkload]
	tot         krt.Singleton[total]
	members     krt.Collection[member]
	statuses    krt.Collection[krt.ObjectWithStatus[service, svcStatus]]
	shadows     krt.Collection[shadow]
	replays     []*replay
}

func buildModel(stop chan struct{}) *modelPipeline {
	o := func(name string) []krt.CollectionOption {
		return []krt.CollectionOption{krt.WithStop(stop), krt.WithName(name)}
	}
	m := &modelPipeline{}
	m.pods = krt.NewStaticCollection[pod](nil, nil, o("Pods")...)
	m.extra = krt.NewStaticCollection[pod](nil, nil, o("ExtraPods")...)
	m.svcs = krt.NewStaticCollection[service](nil, nil, o("Services")...)
	m.config = krt.NewStatic[cfg](nil, true, o("Config")...)
	m.all = krt.JoinCollection([]krt.Collection[pod]{m.pods, m.extra}, o("AllPods")...)
	podsByNS := krt.NewNamespaceIndex(m.pods)

	// Index + label filter.
	m.eps = krt.NewCollection(m.svcs, func(ctx krt.HandlerContext, s service) *endpoints {
		ps := podsByNS.Fetch(ctx, s.Namespace, krt.FilterLabel(s.Selector))
		ips := make([]string, 0, len(ps))
		for _, p := range ps {
			ips = append(ips, p.IP)
		}
		slices.Sort(ips)
		return &endpoints{Name: s.Name, Namespace: s.Namespace, IPs: ips}
	}, o("Endpoints")...)

	// Selects-non-empty + namespace filters, and a key fetch of a singleton.
	m.wls = krt.NewCollection(m.pods, func(ctx krt.HandlerContext, p pod) *mWorkload {
		svcs := krt.Fetch(ctx, m.svcs, krt.FilterNamespace(p.Namespace), krt.FilterSelectsNonEmpty(p.Labels))
		names := make([]string, 0, len(svcs))
		for _, s := range svcs {
			names = append(names, s.Name)
		}
		w := &mWorkload{Key: p.ResourceName(), IP: p.IP, Services: names}
		if c := krt.FetchOne(ctx, m.config.AsCollection(), krt.FilterKey(krt.SingletonKey)); c != nil {
			w.Suffix = c.Suffix
		}
		return w
	}, o("Workloads")...)

	// A singleton over derived collections, through unfiltered fetches.
	m.tot = krt.NewSingleton(func(ctx krt.HandlerContext) *total {
		t := &total{}
		for _, e := range krt.Fetch(ctx, m.eps) {
			t.IPs += len(e.IPs)
		}
		t.Workloads = len(krt.Fetch(ctx, m.wls))
		if t.IPs == 0 && t.Workloads == 0 {
			return nil
		}
		return t
	}, o("Total")...)

	// Many outputs per input, with key collisions between services.
	m.members = krt.NewManyCollection(m.svcs, func(ctx krt.HandlerContext, s service) []member {
		if len(s.Selector) == 0 {
			return nil
		}
		var out []member
		for _, p := range krt.Fetch(ctx, m.all, krt.FilterNamespace(s.Namespace), krt.FilterLabel(s.Selector)) {
			out = append(out, member{Key: p.ResourceName(), Svc: s.ResourceName()})
		}
		return out
	}, o("Members")...)

	// Status plus output, reading a derived collection by key.
	m.statuses, m.shadows = krt.NewStatusCollection(m.svcs, func(ctx krt.HandlerContext, s service) (*svcStatus, *shadow) {
		if len(s.Selector) == 0 {
			return nil, nil
		}
		e := krt.FetchOne(ctx, m.eps, krt.FilterKey(s.ResourceName()))
		if e == nil {
			return &svcStatus{}, nil
		}
		st := &svcStatus{Endpoints: len(e.IPs)}
		if st.Endpoints == 0 {
			return st, nil
		}
		return st, &shadow{Key: s.ResourceName() + "-shadow", Count: st.Endpoints}
	}, o("Shadows")...)

	m.replays = []*replay{
		newReplay("AllPods", m.all, krt.GetKey[pod]),
		newReplay("Endpoints", m.eps, krt.GetKey[endpoints]),
		newReplay("Workloads", m.wls, krt.GetKey[mWorkload]),
		newReplay("Total", m.tot.AsCollection(), func(total) string { return krt.SingletonKey }),
		newReplay("Members", m.members, krt.GetKey[member]),
		newReplay("Statuses", m.statuses, func(o krt.ObjectWithStatus[service, svcStatus]) string { return o.Obj.ResourceName() }),
		newReplay("Shadows", m.shadows, krt.GetKey[shadow]),
	}
	return m
}

// replay rebuilds a collection's state from its event stream and checks that
// each event is consistent with what came before.
type replay struct {
	name  string
	mu    sync.Mutex
	state map[string]any
	errs  []string
	list  func() map[string]any
}

func newReplay[T any](name string, c krt.Collection[T], key func(T) string) *replay {
	r := &replay{name: name, state: map[string]any{}}
	r.list = func() map[string]any {
		m := map[string]any{}
		for _, o := range c.List() {
			m[key(o)] = o
		}
		return m
	}
	c.Register(func(e krt.Event[T]) {
		r.mu.Lock()
		defer r.mu.Unlock()
		fail := func(format string, args ...any) { r.errs = append(r.errs, fmt.Sprintf(format, args...)) }
		switch {
		case e.Old == nil && e.New == nil:
			fail("event %v with neither Old nor New", e.Event)
			return
		case e.Event == krt.EventAdd && (e.Old != nil || e.New == nil),
			e.Event == krt.EventUpdate && (e.Old == nil || e.New == nil),
			e.Event == krt.EventDelete && (e.Old == nil || e.New != nil):
			fail("event %v with Old=%v New=%v", e.Event, e.Old != nil, e.New != nil)
			return
		}
		k := key(e.Latest())
		prev, had := r.state[k]
		switch e.Event {
		case krt.EventAdd:
			if had {
				fail("add of %s, which exists", k)
			}
			r.state[k] = *e.New
		case krt.EventUpdate:
			if !had {
				fail("update of %s, which does not exist", k)
			} else if d := cmp.Diff(prev, any(*e.Old)); d != "" {
				fail("update of %s: Old differs from the last state (-last +old):\n%s", k, d)
			}
			r.state[k] = *e.New
		case krt.EventDelete:
			if !had {
				fail("delete of %s, which does not exist", k)
			} else if d := cmp.Diff(prev, any(*e.Old)); d != "" {
				fail("delete of %s: Old differs from the last state (-last +old):\n%s", k, d)
			}
			delete(r.state, k)
		}
	})
	return r
}

func (r *replay) snapshot() (map[string]any, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.state), slices.Clone(r.errs)
}

// modelInputs is the reference copy of the inputs.
type modelInputs struct {
	pods, extra map[string]pod
	svcs        map[string]service
	config      *cfg
}

// expected computes every derived collection from scratch.
func (in *modelInputs) expected() map[string]map[string]any {
	exp := map[string]map[string]any{}
	set := func(c, k string, v any) {
		if exp[c] == nil {
			exp[c] = map[string]any{}
		}
		exp[c][k] = v
	}
	for _, name := range []string{"AllPods", "Endpoints", "Workloads", "Total", "Members", "Statuses", "Shadows"} {
		exp[name] = map[string]any{}
	}
	all := maps.Clone(in.extra)
	maps.Copy(all, in.pods) // Pods is listed first: it wins
	for k, p := range all {
		set("AllPods", k, p)
	}
	tot := total{}
	epsByKey := map[string]endpoints{}
	for k, s := range in.svcs {
		ips := []string{}
		for _, p := range in.pods {
			if p.Namespace == s.Namespace && subset(s.Selector, p.Labels) {
				ips = append(ips, p.IP)
			}
		}
		slices.Sort(ips)
		e := endpoints{Name: s.Name, Namespace: s.Namespace, IPs: ips}
		epsByKey[k] = e
		set("Endpoints", k, e)
		tot.IPs += len(ips)
	}
	for k, p := range in.pods {
		names := []string{}
		for _, s := range sortedValues(in.svcs) {
			if s.Namespace == p.Namespace && len(s.Selector) > 0 && subset(s.Selector, p.Labels) {
				names = append(names, s.Name)
			}
		}
		w := mWorkload{Key: k, IP: p.IP, Services: names}
		if in.config != nil {
			w.Suffix = in.config.Suffix
		}
		set("Workloads", k, w)
		tot.Workloads++
	}
	if tot.IPs > 0 || tot.Workloads > 0 {
		set("Total", krt.SingletonKey, tot)
	}
	for _, s := range sortedValues(in.svcs) { // smallest service key first: it wins
		if len(s.Selector) == 0 {
			continue
		}
		for pk, p := range all {
			if _, taken := exp["Members"][pk]; !taken && p.Namespace == s.Namespace && subset(s.Selector, p.Labels) {
				set("Members", pk, member{Key: pk, Svc: s.ResourceName()})
			}
		}
		n := len(epsByKey[s.ResourceName()].IPs)
		set("Statuses", s.ResourceName(), krt.ObjectWithStatus[service, svcStatus]{Obj: s, Status: svcStatus{Endpoints: n}})
		if n > 0 {
			set("Shadows", s.ResourceName()+"-shadow", shadow{Key: s.ResourceName() + "-shadow", Count: n})
		}
	}
	return exp
}

func subset(sub, super map[string]string) bool {
	for k, v := range sub {
		if super[k] != v {
			return false
		}
	}
	return true
}

func sortedValues[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// Random input generation over small pools, so keys, labels and selectors
// collide often.
var (
	modelNamespaces = []string{"a", "b"}
	modelLabelSets  = []map[string]string{
		{"app": "x"}, {"app": "y"}, {"app": "x", "tier": "db"}, {"app": "y", "tier": "db"}, {"tier": "db"}, {},
	}
	modelSelectors = []map[string]string{{}, {"app": "x"}, {"app": "y"}, {"tier": "db"}, {"app": "x", "tier": "db"}}
)

func randomPod(c chooser) pod {
	return pod{
		Name:      fmt.Sprintf("p%d", c.intn(6)),
		Namespace: modelNamespaces[c.intn(len(modelNamespaces))],
		Labels:    maps.Clone(modelLabelSets[c.intn(len(modelLabelSets))]),
		IP:        fmt.Sprintf("10.0.0.%d", c.intn(8)),
	}
}

func randomService(c chooser) service {
	return service{
		Name:      fmt.Sprintf("s%d", c.intn(4)),
		Namespace: modelNamespaces[c.intn(len(modelNamespaces))],
		Selector:  maps.Clone(modelSelectors[c.intn(len(modelSelectors))]),
	}
}

func randomKey(c chooser, prefix string, n int) string {
	return modelNamespaces[c.intn(len(modelNamespaces))] + "/" + fmt.Sprintf("%s%d", prefix, c.intn(n))
}

// pickKey returns one key of m (sorted, so a seed replays), or "" when m is
// empty.
func pickKey[T any](c chooser, m map[string]T) string {
	if len(m) == 0 {
		return ""
	}
	return slices.Sorted(maps.Keys(m))[c.intn(len(m))]
}

// step applies one random operation to both the pipeline and the reference.
// Besides whole-object writes, label-only changes of a selected pod and
// selector-only changes of a selecting service move objects between the
// label and selector buckets of the fetched collections while everything
// else stays.
func step(c chooser, m *modelPipeline, in *modelInputs) string {
	switch c.intn(13) {
	case 10:
		k := pickKey(c, in.pods)
		if k == "" {
			return "relabel pod: none"
		}
		p := in.pods[k]
		p.Labels = maps.Clone(modelLabelSets[c.intn(len(modelLabelSets))])
		m.pods.UpdateObject(p)
		in.pods[k] = p
		return fmt.Sprintf("relabel pod %s to %v", k, p.Labels)
	case 11:
		k := pickKey(c, in.extra)
		if k == "" {
			return "relabel extra pod: none"
		}
		p := in.extra[k]
		p.Labels = maps.Clone(modelLabelSets[c.intn(len(modelLabelSets))])
		m.extra.ConditionalUpdateObject(p)
		in.extra[k] = p
		return fmt.Sprintf("relabel extra pod %s to %v", k, p.Labels)
	case 12:
		k := pickKey(c, in.svcs)
		if k == "" {
			return "reselect service: none"
		}
		s := in.svcs[k]
		s.Selector = maps.Clone(modelSelectors[c.intn(len(modelSelectors))])
		m.svcs.UpdateObject(s)
		in.svcs[k] = s
		return fmt.Sprintf("reselect service %s to %v", k, s.Selector)
	case 0, 1, 2:
		p := randomPod(c)
		m.pods.UpdateObject(p)
		in.pods[p.ResourceName()] = p
		return "update pod " + p.ResourceName()
	case 3:
		k := randomKey(c, "p", 6)
		m.pods.DeleteObject(k)
		delete(in.pods, k)
		return "delete pod " + k
	case 4:
		s := randomService(c)
		m.svcs.UpdateObject(s)
		in.svcs[s.ResourceName()] = s
		return "update service " + s.ResourceName()
	case 5:
		k := randomKey(c, "s", 4)
		m.svcs.DeleteObject(k)
		delete(in.svcs, k)
		return "delete service " + k
	case 6:
		p := randomPod(c)
		m.extra.ConditionalUpdateObject(p)
		in.extra[p.ResourceName()] = p
		return "update extra pod " + p.ResourceName()
	case 7:
		k := randomKey(c, "p", 6)
		m.extra.DeleteObject(k)
		delete(in.extra, k)
		return "delete extra pod " + k
	case 8:
		if c.intn(3) == 0 {
			m.config.Set(nil)
			in.config = nil
			return "clear config"
		}
		v := cfg{Suffix: fmt.Sprintf("v%d", c.intn(3))}
		m.config.Set(&v)
		in.config = &v
		return "set config " + v.Suffix
	default:
		n := c.intn(4)
		ps := make([]pod, n)
		in.pods = map[string]pod{}
		for i := range ps {
			ps[i] = randomPod(c)
			in.pods[ps[i].ResourceName()] = ps[i]
		}
		m.pods.Reset(ps)
		return fmt.Sprintf("reset pods to %d", len(in.pods))
	}
}

// converge waits until every derived collection and every replayed event
// stream equal the reference, or fails with the differences.
func converge(tb testing.TB, m *modelPipeline, in *modelInputs, history []string) {
	tb.Helper()
	exp := in.expected()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var problems []string
		for _, r := range m.replays {
			got, errs := r.snapshot()
			for _, e := range errs {
				problems = append(problems, r.name+": "+e)
			}
			if d := cmp.Diff(exp[r.name], r.list()); d != "" {
				problems = append(problems, fmt.Sprintf("%s: List() differs from recomputation (-want +got):\n%s", r.name, d))
			}
			if d := cmp.Diff(exp[r.name], got); d != "" {
				problems = append(problems, fmt.Sprintf("%s: replayed events differ from recomputation (-want +got):\n%s", r.name, d))
			}
		}
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after operations:\n  %s\n%s", strings.Join(history, "\n  "), strings.Join(problems, "\n"))
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// runModel runs one random sequence, checking at quiescent points.
func runModel(tb testing.TB, c chooser, steps int) {
	stop := make(chan struct{})
	defer close(stop)
	m := buildModel(stop)
	in := &modelInputs{pods: map[string]pod{}, extra: map[string]pod{}, svcs: map[string]service{}}
	var history []string
	for i := 0; i < steps && !c.done(); i++ {
		history = append(history, step(c, m, in))
		if c.intn(4) == 0 { // quiescent point
			converge(tb, m, in, history)
		}
	}
	converge(tb, m, in, history)
}

func TestModel(t *testing.T) {
	if *modelSeed != 0 {
		runModel(t, randChooser{rand.New(rand.NewPCG(*modelSeed, 0))}, *modelSteps)
		return
	}
	runs := *modelRuns
	if testing.Short() {
		runs = 100
	}
	base := uint64(time.Now().UnixNano())
	for i := range runs {
		seed := base + uint64(i)
		ok := t.Run("", func(t *testing.T) {
			runModel(t, randChooser{rand.New(rand.NewPCG(seed, 0))}, *modelSteps)
		})
		if !ok {
			t.Fatalf("sequence failed; replay with: go test ./pkg/kube/krt/ -run '^TestModel$' -model.seed=%d", seed)
		}
	}
}

func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 4, 1, 2, 3, 5, 6, 7, 8, 9})
	f.Add([]byte{4, 1, 1, 0, 0, 0, 0, 0, 3, 9, 2, 2, 2, 2})
	f.Add([]byte("pods and services move between selectors"))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 10, 0, 1, 10, 1, 3, 12, 0, 2, 6, 1, 1, 11, 0, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 512 {
			data = data[:512]
		}
		runModel(t, &byteChooser{b: data}, 64)
	})
}
