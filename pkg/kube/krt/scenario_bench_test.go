// The krt benchmark scenario (architecture notes: krt-bench-scenario.md),
// written once and run against two libraries:
//
//   - here, against github.com/infermesh/infermesh/pkg/kube/krt;
//   - in bench/istio (its own module), against istio.io/istio/pkg/kube/krt:
//     hack/bench-compare.sh copies this file there, rewriting the krt import
//     path and nothing else.
//
// This file may therefore only use the API both libraries share. What differs
// per side (Istio's log silencing, the transformationCount hook) lives in
// scenario_side_test.go here and bench/istio/side_test.go there. Package-level
// identifiers carry an "sc" prefix so that they do not collide with the other
// tests of this package.
//
// Data shape (generalises Istio's BenchmarkControllers, which is N=1000):
//
//	N pods, NS = max(2, N/500) namespaces, M = 25*NS services.
//	pod i:     ns-(i%NS), labels {app: app-((i/NS)%25)}, unique IPv4
//	service j: ns-(j%NS), selector {app: app-(j/NS)}   (j/NS in 0..24)
//	=> 500 pods and 25 services per namespace; every service selects exactly
//	   20 pods; every pod is selected by exactly one service.
//
// Two derived collections (built separately, one per sub-benchmark):
//
//	W "workloads" (pod-centric; exactly Istio's BenchmarkControllers transform):
//	   Workload(pod) = {name, ns, ip, sorted names of services in the pod's
//	   namespace whose non-empty selector matches the pod's labels}
//	   via ServicesByNamespace index + FilterSelectsNonEmpty(pod.Labels).
//	E "endpoints" (service-centric):
//	   Endpoints(svc) = {name, ns, sorted IPs of pods in svc's namespace whose
//	   labels match svc.Selector} via PodsByNamespace index + FilterLabel(sel).
//
// TestScenarioDigest prints one "krt-digest ..." line per pipeline and size;
// the lines must be byte-identical on both sides.
package krt_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// ---------------------------------------------------------------- inputs

type scPod struct {
	Name, Namespace string
	Labels          map[string]string
	IP              string
}

func (p scPod) ResourceName() string         { return p.Namespace + "/" + p.Name }
func (p scPod) GetNamespace() string         { return p.Namespace }
func (p scPod) GetLabels() map[string]string { return p.Labels }

type scService struct {
	Name, Namespace string
	Selector        map[string]string
}

func (s scService) ResourceName() string                { return s.Namespace + "/" + s.Name }
func (s scService) GetNamespace() string                { return s.Namespace }
func (s scService) GetLabelSelector() map[string]string { return s.Selector }

// ---------------------------------------------------------------- outputs

type scWorkload struct {
	Name, Namespace string
	IP              string
	Services        []string // sorted
}

func (w scWorkload) ResourceName() string { return w.Namespace + "/" + w.Name }
func (w scWorkload) Equals(o scWorkload) bool {
	return w.Name == o.Name && w.Namespace == o.Namespace && w.IP == o.IP && slices.Equal(w.Services, o.Services)
}

type scEndpoints struct {
	Name, Namespace string
	IPs             []string // sorted
}

func (e scEndpoints) ResourceName() string { return e.Namespace + "/" + e.Name }
func (e scEndpoints) Equals(o scEndpoints) bool {
	return e.Name == o.Name && e.Namespace == o.Namespace && slices.Equal(e.IPs, o.IPs)
}

// ---------------------------------------------------------------- data

const (
	scPodsPerNS = 500
	scAppsPerNS = 25 // = services per namespace; 20 pods per service
)

type scShape struct{ N, NS, M int }

func scShapeFor(n int) scShape {
	ns := n / scPodsPerNS
	if ns < 2 {
		ns = 2
	}
	return scShape{N: n, NS: ns, M: ns * scAppsPerNS}
}

const scFirstIP uint32 = 10<<24 | 10 // 10.0.0.10, like Istio's bench

var scIPCounter = scFirstIP

func scNextIP() string {
	v := scIPCounter
	scIPCounter++
	return strconv.Itoa(int(v>>24)) + "." + strconv.Itoa(int(v>>16&0xff)) + "." +
		strconv.Itoa(int(v>>8&0xff)) + "." + strconv.Itoa(int(v&0xff))
}

func scAppLabel(a int) map[string]string { return map[string]string{"app": "app-" + strconv.Itoa(a)} }

func scGenPods(s scShape) []scPod {
	pods := make([]scPod, s.N)
	for i := range pods {
		pods[i] = scPod{
			Name:      "pod-" + strconv.Itoa(i),
			Namespace: "ns-" + strconv.Itoa(i%s.NS),
			Labels:    scAppLabel((i / s.NS) % scAppsPerNS),
			IP:        scNextIP(),
		}
	}
	return pods
}

func scGenServices(s scShape) []scService {
	svcs := make([]scService, s.M)
	for j := range svcs {
		svcs[j] = scService{
			Name:      "svc-" + strconv.Itoa(j),
			Namespace: "ns-" + strconv.Itoa(j%s.NS),
			Selector:  scAppLabel(j / s.NS),
		}
	}
	return svcs
}

// scSvcKeyFor returns the key of the (single) service in namespace index ns selecting app index app.
func scSvcKeyFor(s scShape, ns, app int) string {
	return "ns-" + strconv.Itoa(ns) + "/svc-" + strconv.Itoa(app*s.NS+ns)
}

// ---------------------------------------------------------------- pipelines

func scOpts(stop <-chan struct{}, name string) []krt.CollectionOption {
	return []krt.CollectionOption{krt.WithStop(stop), krt.WithName(name)}
}

type scInputs struct {
	Pods     krt.StaticCollection[scPod]
	Services krt.StaticCollection[scService]
}

func scNewInputs(stop <-chan struct{}, pods []scPod, svcs []scService) scInputs {
	return scInputs{
		Pods:     krt.NewStaticCollection[scPod](nil, pods, scOpts(stop, "Pods")...),
		Services: krt.NewStaticCollection[scService](nil, svcs, scOpts(stop, "Services")...),
	}
}

// Scenario W: pod -> workload, joined with services by namespace index + selector filter.
func scBuildWorkloads(stop <-chan struct{}, in scInputs) krt.Collection[scWorkload] {
	servicesByNS := krt.NewNamespaceIndex[scService](in.Services)
	return krt.NewCollection(in.Pods, func(ctx krt.HandlerContext, p scPod) *scWorkload {
		svcs := servicesByNS.Fetch(ctx, p.Namespace, krt.FilterSelectsNonEmpty(p.Labels))
		names := make([]string, 0, len(svcs))
		for _, s := range svcs {
			names = append(names, s.Name)
		}
		sort.Strings(names)
		return &scWorkload{Name: p.Name, Namespace: p.Namespace, IP: p.IP, Services: names}
	}, scOpts(stop, "Workloads")...)
}

// Scenario E: service -> endpoints, joined with pods by namespace index + label filter.
func scBuildEndpoints(stop <-chan struct{}, in scInputs) krt.Collection[scEndpoints] {
	podsByNS := krt.NewNamespaceIndex[scPod](in.Pods)
	return krt.NewCollection(in.Services, func(ctx krt.HandlerContext, s scService) *scEndpoints {
		pods := podsByNS.Fetch(ctx, s.Namespace, krt.FilterLabel(s.Selector))
		ips := make([]string, 0, len(pods))
		for _, p := range pods {
			ips = append(ips, p.IP)
		}
		sort.Strings(ips)
		return &scEndpoints{Name: s.Name, Namespace: s.Namespace, IPs: ips}
	}, scOpts(stop, "Endpoints")...)
}

var scSizes = []int{1_000, 10_000, 50_000}

type scSyncer interface {
	WaitUntilSynced(stop <-chan struct{}) bool
}

type scScenario struct {
	name  string
	build func(stop <-chan struct{}, in scInputs) (syncer scSyncer, count func() int)
	want  func(s scShape) int
}

var scScenarios = []scScenario{
	{"W", func(stop <-chan struct{}, in scInputs) (scSyncer, func() int) {
		c := scBuildWorkloads(stop, in)
		return c, func() int { return len(c.List()) }
	}, func(s scShape) int { return s.N }},
	{"E", func(stop <-chan struct{}, in scInputs) (scSyncer, func() int) {
		c := scBuildEndpoints(stop, in)
		return c, func() int { return len(c.List()) }
	}, func(s scShape) int { return s.M }},
}

// ---------------------------------------------------------------- (a) build + initial sync

// BenchmarkSync: one op = create both static input collections from
// pre-generated slices, create index + derived collection, wait until the
// derived collection HasSynced. Input object generation is excluded.
func BenchmarkSync(b *testing.B) {
	for _, sc := range scScenarios {
		for _, n := range scSizes {
			s := scShapeFor(n)
			pods, svcs := scGenPods(s), scGenServices(s)
			b.Run(fmt.Sprintf("%s/N=%d", sc.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					stop := make(chan struct{})
					in := scNewInputs(stop, pods, svcs)
					c, count := sc.build(stop, in)
					if !c.WaitUntilSynced(stop) {
						b.Fatal("not synced")
					}
					b.StopTimer()
					if got := count(); got != sc.want(s) {
						b.Fatalf("got %d outputs, want %d", got, sc.want(s))
					}
					close(stop)
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/pod")
			})
		}
	}
}

// ---------------------------------------------------------------- (c) heap after sync

// BenchmarkHeap: builds once per op and reports live heap attributable to the
// krt pipeline (HeapAlloc after sync minus HeapAlloc before, both after 2x GC).
// The input slices (pods/svcs) are allocated before the baseline, so the
// delta is krt's copies of inputs + indexes + outputs + dependency state.
// ns/op of this benchmark is meaningless (it includes forced GCs).
func BenchmarkHeap(b *testing.B) {
	for _, sc := range scScenarios {
		for _, n := range scSizes {
			s := scShapeFor(n)
			pods, svcs := scGenPods(s), scGenServices(s)
			b.Run(fmt.Sprintf("%s/N=%d", sc.name, n), func(b *testing.B) {
				var total, totalInuse, goroutines float64
				var ms runtime.MemStats
				for i := 0; i < b.N; i++ {
					runtime.GC()
					runtime.GC()
					runtime.ReadMemStats(&ms)
					before, beforeInuse := ms.HeapAlloc, ms.HeapInuse
					g0 := runtime.NumGoroutine()
					stop := make(chan struct{})
					in := scNewInputs(stop, pods, svcs)
					c, count := sc.build(stop, in)
					if !c.WaitUntilSynced(stop) {
						b.Fatal("not synced")
					}
					if got := count(); got != sc.want(s) {
						b.Fatalf("got %d outputs, want %d", got, sc.want(s))
					}
					runtime.GC()
					runtime.GC()
					runtime.ReadMemStats(&ms)
					total += float64(ms.HeapAlloc) - float64(before)
					totalInuse += float64(ms.HeapInuse) - float64(beforeInuse)
					goroutines += float64(runtime.NumGoroutine() - g0)
					runtime.KeepAlive(c)
					runtime.KeepAlive(in)
					close(stop)
					time.Sleep(20 * time.Millisecond) // let krt goroutines exit
				}
				b.ReportMetric(total/float64(b.N)/(1<<20), "heapMB")
				b.ReportMetric(totalInuse/float64(b.N)/(1<<20), "inuseMB")
				b.ReportMetric(total/float64(b.N)/float64(n), "heapB/pod")
				b.ReportMetric(goroutines/float64(b.N), "goroutines")
			})
		}
	}
}

// ---------------------------------------------------------------- update harness

type scUpdateKind int

const (
	scChangeIP scUpdateKind = iota
	scFlipLabel
)

// scSeen is one output event carrying a new value, as forwarded by the handler.
type scSeen struct {
	key string
	ips []string // E: endpoint IPs; W: [ip]
	svc []string // W: service names
}

// scHarness is a synced pipeline (W or E) with a handler registered on its
// output. It drives single-pod updates and waits for their output events; it
// is shared by BenchmarkUpdate and TestScenarioDigest.
type scHarness struct {
	s         scShape
	endpoints bool
	in        scInputs
	coll      any             // the derived collection (for transformationCount)
	list      func() []string // List() rendered deterministically, sorted by key
	events    chan scSeen     // every event with New != nil
	total     atomic.Int64    // every event the handler has seen
	cur       []scPod         // current pod objects
	appOf     []int           // current app index of every pod
	stop      chan struct{}
}

// scNewHarness builds the pipeline, registers the handler, and returns once
// the output is synced and its initial adds have been seen. Call close().
func scNewHarness(s scShape, endpoints bool) *scHarness {
	h := &scHarness{s: s, endpoints: endpoints, stop: make(chan struct{})}
	pods, svcs := scGenPods(s), scGenServices(s)
	h.in = scNewInputs(h.stop, pods, svcs)
	h.events = make(chan scSeen, s.N+s.M+1024) // holds all initial ADDs
	var synced scSyncer
	if endpoints {
		c := scBuildEndpoints(h.stop, h.in)
		synced, h.coll = c, c
		reg := c.Register(func(e krt.Event[scEndpoints]) {
			h.total.Add(1)
			if e.New != nil {
				h.events <- scSeen{key: e.New.ResourceName(), ips: e.New.IPs}
			}
		})
		reg.WaitUntilSynced(h.stop)
		h.list = func() []string {
			out := c.List()
			lines := make([]string, 0, len(out))
			for _, e := range out {
				lines = append(lines, e.ResourceName()+" ips="+strings.Join(e.IPs, ","))
			}
			return lines
		}
	} else {
		c := scBuildWorkloads(h.stop, h.in)
		synced, h.coll = c, c
		reg := c.Register(func(e krt.Event[scWorkload]) {
			h.total.Add(1)
			if e.New != nil {
				h.events <- scSeen{key: e.New.ResourceName(), ips: []string{e.New.IP}, svc: e.New.Services}
			}
		})
		reg.WaitUntilSynced(h.stop)
		h.list = func() []string {
			out := c.List()
			lines := make([]string, 0, len(out))
			for _, w := range out {
				lines = append(lines, w.ResourceName()+" ip="+w.IP+" services="+strings.Join(w.Services, ","))
			}
			return lines
		}
	}
	synced.WaitUntilSynced(h.stop)
	// Drain initial ADD events.
	want := s.N
	if endpoints {
		want = s.M
	}
	for i := 0; i < want; i++ {
		<-h.events
	}
	h.cur = slices.Clone(pods)
	h.appOf = make([]int, s.N)
	for i := range h.appOf {
		h.appOf[i] = (i / s.NS) % scAppsPerNS
	}
	return h
}

func (h *scHarness) close() { close(h.stop) }

// update applies op number op: one pod (round-robin with stride 7919) gets a
// fresh IP or has its app label moved to a neighbouring app. It then blocks
// until the handler has seen the output event(s) carrying the new value, and
// returns the time from UpdateObject to the last expected event.
//
//	ip:    W: 1 Workload update; E: 1 Endpoints update.
//	label: pod app label a -> a^1 (same namespace, other service).
//	       W: 1 Workload update (Services changes); E: 2 Endpoints updates.
func (h *scHarness) update(op int, kind scUpdateKind) time.Duration {
	s := h.s
	i := (op * 7919) % s.N // stride over pods (7919 prime, coprime to sizes)
	p := h.cur[i]
	ns := i % s.NS
	oldApp := h.appOf[i]
	newApp := oldApp
	switch kind {
	case scChangeIP:
		p.IP = scNextIP()
	case scFlipLabel:
		newApp = oldApp ^ 1
		if newApp >= scAppsPerNS {
			newApp = oldApp - 1
		}
		p.Labels = scAppLabel(newApp)
		h.appOf[i] = newApp
	}
	h.cur[i] = p
	t0 := time.Now()
	h.in.Pods.UpdateObject(p)
	// Wait for the expected output event(s).
	switch {
	case !h.endpoints && kind == scChangeIP:
		for ev := range h.events {
			if ev.key == p.ResourceName() && ev.ips[0] == p.IP {
				break
			}
		}
	case !h.endpoints && kind == scFlipLabel:
		wantSvc := "svc-" + strconv.Itoa(newApp*s.NS+ns)
		for ev := range h.events {
			if ev.key == p.ResourceName() && len(ev.svc) == 1 && ev.svc[0] == wantSvc {
				break
			}
		}
	case h.endpoints && kind == scChangeIP:
		k := scSvcKeyFor(s, ns, oldApp)
		for ev := range h.events {
			if ev.key == k && slices.Contains(ev.ips, p.IP) {
				break
			}
		}
	case h.endpoints && kind == scFlipLabel:
		kOld, kNew := scSvcKeyFor(s, ns, oldApp), scSvcKeyFor(s, ns, newApp)
		gotOld, gotNew := false, false
		for ev := range h.events {
			if ev.key == kOld && !slices.Contains(ev.ips, p.IP) {
				gotOld = true
			}
			if ev.key == kNew && slices.Contains(ev.ips, p.IP) {
				gotNew = true
			}
			if gotOld && gotNew {
				break
			}
		}
	}
	return time.Since(t0)
}

// ---------------------------------------------------------------- (b) single-update latency

func scPercentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[int(float64(len(s)-1)*p)].Nanoseconds())
}

// BenchmarkUpdate: pipeline is built and synced outside the timer, with a
// handler registered on the derived collection. One op = UpdateObject() of a
// single pod (round-robin over all pods) followed by blocking until the
// registered handler has observed the resulting output event(s) carrying the
// new value. Measures end-to-end propagation latency, serially (no pipelining).
// See scHarness.update for the two kinds of update.
//
// Where the library reports it (transformationCount), runs/op is the number of
// transformation runs of the derived collection per update.
func BenchmarkUpdate(b *testing.B) {
	for _, kind := range []scUpdateKind{scChangeIP, scFlipLabel} {
		kname := map[scUpdateKind]string{scChangeIP: "ip", scFlipLabel: "label"}[kind]
		for _, n := range scSizes {
			s := scShapeFor(n)
			b.Run(fmt.Sprintf("W/%s/N=%d", kname, n), func(b *testing.B) {
				scRunUpdate(b, s, kind, false)
			})
			b.Run(fmt.Sprintf("E/%s/N=%d", kname, n), func(b *testing.B) {
				scRunUpdate(b, s, kind, true)
			})
		}
	}
	// The label case of E also at 100,000 pods (200 namespaces): its cost
	// should not grow with N, only with the pods one selector matches.
	b.Run(fmt.Sprintf("E/label/N=%d", scLabelSize), func(b *testing.B) {
		scRunUpdate(b, scShapeFor(scLabelSize), scFlipLabel, true)
	})
}

// scLabelSize is the extra size of BenchmarkUpdate's E/label case.
const scLabelSize = 100_000

func scRunUpdate(b *testing.B, s scShape, kind scUpdateKind, endpoints bool) {
	h := scNewHarness(s, endpoints)
	defer h.close()
	lat := make([]time.Duration, 0, b.N)
	runs0, haveRuns := transformationCount(h.coll)
	b.ReportAllocs()
	b.ResetTimer()
	for op := 0; op < b.N; op++ {
		lat = append(lat, h.update(op, kind))
	}
	b.StopTimer()
	b.ReportMetric(scPercentile(lat, 0.50), "p50-ns")
	b.ReportMetric(scPercentile(lat, 0.99), "p99-ns")
	if haveRuns {
		runs1, _ := transformationCount(h.coll)
		b.ReportMetric(float64(runs1-runs0)/float64(b.N), "runs/op")
	}
}

// ---------------------------------------------------------------- (d) bulk churn (Istio's BenchmarkControllers loop)

// BenchmarkChurn mirrors the timed loop of Istio's BenchmarkControllers but on
// static collections: one op = UpdateObject() every one of the N pods with a
// fresh IP (no waiting in between), then wait for N Workload events.
func BenchmarkChurn(b *testing.B) {
	for _, n := range scSizes {
		s := scShapeFor(n)
		b.Run(fmt.Sprintf("W/N=%d", n), func(b *testing.B) {
			pods, svcs := scGenPods(s), scGenServices(s)
			stop := make(chan struct{})
			defer close(stop)
			in := scNewInputs(stop, pods, svcs)
			c := scBuildWorkloads(stop, in)
			events := make(chan struct{}, n)
			c.Register(func(e krt.Event[scWorkload]) { events <- struct{}{} }).WaitUntilSynced(stop)
			c.WaitUntilSynced(stop)
			for i := 0; i < n; i++ {
				<-events
			}
			cur := slices.Clone(pods)
			b.ReportAllocs()
			b.ResetTimer()
			for op := 0; op < b.N; op++ {
				for i := range cur {
					cur[i].IP = scNextIP()
					in.Pods.UpdateObject(cur[i])
				}
				for i := 0; i < n; i++ {
					<-events
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/pod")
		})
	}
}

// ---------------------------------------------------------------- cross-library digest

// scDigestUpdates is the number of pod updates TestScenarioDigest applies.
const scDigestUpdates = 200

// TestScenarioDigest checks that a library computes the same thing as the
// other side of the comparison: for W and E at N=1k and 10k it applies a fixed
// sequence of updates (alternating fresh IP and label flip, same pods as
// BenchmarkUpdate) and prints one line
//
//	krt-digest scenario=<W|E> N=<n> events=<events seen> sha256=<outputs>
//
// where events counts every event the registered handler saw (initial adds
// included) and sha256 is taken over List() sorted by key, one line per output.
// hack/bench-compare.sh requires the lines of both sides to be identical.
//
// If KRT_DIGEST_DUMP names a directory, the rendered outputs are also written
// there as <W|E>-<n>.txt, so that differing digests can be diffed.
func TestScenarioDigest(t *testing.T) {
	for _, sc := range []string{"W", "E"} {
		for _, n := range []int{1_000, 10_000} {
			t.Run(fmt.Sprintf("%s/N=%d", sc, n), func(t *testing.T) {
				scIPCounter = scFirstIP // same IPs on every run and on both sides
				h := scNewHarness(scShapeFor(n), sc == "E")
				defer h.close()
				for op := 0; op < scDigestUpdates; op++ {
					kind := scChangeIP
					if op%2 == 1 {
						kind = scFlipLabel
					}
					h.update(op, kind)
				}
				time.Sleep(300 * time.Millisecond) // let stray events arrive
				events := h.total.Load()
				lines := h.list()
				sort.Strings(lines) // keys come first on every line
				var buf strings.Builder
				for _, l := range lines {
					buf.WriteString(l)
					buf.WriteByte('\n')
				}
				sum := sha256.Sum256([]byte(buf.String()))
				if dir := os.Getenv("KRT_DIGEST_DUMP"); dir != "" {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.txt", sc, n)), []byte(buf.String()), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if want := scShapeFor(n); (sc == "W" && len(lines) != want.N) || (sc == "E" && len(lines) != want.M) {
					t.Errorf("got %d outputs, want %d (W) or %d (E)", len(lines), want.N, want.M)
				}
				fmt.Printf("krt-digest scenario=%s N=%d events=%d sha256=%s\n", sc, n, events, hex.EncodeToString(sum[:]))
			})
		}
	}
}
