// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package bootstrap

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/test/cputime"
)

// BenchmarkTenantChangeUnderVolume is the noisy-neighbour case of file mode
// (`pilot-discovery discovery -f DIR`, in process, with the defaults of
// the command: file debounce 100 ms, push debounce 100 ms, at most 1 s):
// two tenants share the seed's Gateway (one HTTP listener, so one route
// configuration, http.80). Tenant A (namespace tenant-a) holds 10,000
// HTTPRoutes in one file, each with one rule matching a regular expression
// on the path, spread over 100 hostnames; a goroutine rewrites that file
// every aPeriod with every route changed (a new value of a request header
// each route sets), so the control plane is always busy with A. Tenant B
// (namespace tenant-b) has one HTTPRoute in a file of its own. One op
// rewrites B's file (write beside, rename over, as a ConfigMap's swap
// does) with a new header value and waits until a delta ADS client of the
// Gateway reads a RouteConfiguration carrying it; ops are bGap apart,
// from the time A's first rewrite is being read.
//
// Metrics: p50-ms, p99-ms and max-ms of B's latency, write to ADS read
// (the bound stated in architecture/xds.md, "One tenant's volume", is on
// max-ms); a-served is how many of A's versions reached the client during
// the run (a version overtaken by the next before it was served is not)
// and a-lag-p50-ms their median lag, write to ADS read; cpu-sec/op the
// process's CPU time per op. Validating one version of A's file takes
// about 10 s of CPU (the CRD's CEL rules, as the API server runs them), so
// A's versions are served tens of seconds apart and an op lands on one of
// A's commits now and then: run enough ops (150 take about two minutes
// here) for max-ms to include some. With -v each op and each of A's
// versions served is printed as it happens; TENANT_BENCH_LOG=1 adds the
// file source's log (at debug: each file decoded and committed) and the
// push log. Compare runs
// with benchstat:
//
//	go test -run '^$' -bench TenantChangeUnderVolume -benchtime 150x -count 6 ./pilot/pkg/bootstrap/
func BenchmarkTenantChangeUnderVolume(b *testing.B) {
	const (
		aRoutes = 10000
		aPeriod = time.Second
		bGap    = 300 * time.Millisecond
	)
	tb := startTenantBench(b, aRoutes)
	rds, aFile, bFile, run := tb.rds, tb.aFile, tb.bFile, tb.run

	// A rewrites its 10,000 routes every aPeriod until the ops end.
	aTemplate := tenantARoutes(aRoutes, "A-VALUE")
	rds.trackA([]byte(fmt.Sprintf("a-%d-", run)))
	stopA := make(chan struct{})
	var aDone sync.WaitGroup
	aDone.Go(func() {
		t := time.NewTicker(aPeriod)
		defer t.Stop()
		for i := 1; ; i++ {
			select {
			case <-stopA:
				return
			case <-t.C:
			}
			v := fmt.Sprintf("a-%d-%d", run, i)
			rds.wroteA(i)
			swapFile(b, aFile, bytes.ReplaceAll(aTemplate, []byte("A-VALUE"), []byte(v)))
		}
	})
	// The ops start once A's first rewrite is being read: the first ops
	// are then as much under A's load as the last.
	time.Sleep(aPeriod + aPeriod/2)
	var lat []time.Duration
	cpu0 := cputime.Process(b)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		time.Sleep(bGap)
		v := fmt.Sprintf("b-%d-%d", run, i)
		seen := rds.wait([]byte(v))
		start := time.Now()
		swapFile(b, bFile, tenantBRoute(v))
		at := rds.await(b, seen, v, 10*time.Minute)
		lat = append(lat, at.Sub(start))
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "%s op %d: %v (A versions served so far %d)\n", at.Format(time.RFC3339Nano), i, at.Sub(start), rds.aServed())
		}
	}
	b.StopTimer()
	close(stopA)
	aDone.Wait()
	b.ReportMetric((cputime.Process(b)-cpu0).Seconds()/float64(b.N), "cpu-sec/op")
	slices.Sort(lat)
	b.ReportMetric(ms(pct(lat, 50)), "p50-ms")
	b.ReportMetric(ms(pct(lat, 99)), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	aLags := rds.aLags()
	b.ReportMetric(float64(len(aLags)), "a-served")
	if len(aLags) > 0 {
		b.ReportMetric(ms(pct(aLags, 50)), "a-lag-p50-ms")
	}
	b.Logf("%d ops: p50 %v, p99 %v, max %v; %d of A's versions served", len(lat), pct(lat, 50), pct(lat, 99), lat[len(lat)-1], len(aLags))
}

// BenchmarkTenantChangeOnOtherTenantsCommit is the worst case of
// BenchmarkTenantChangeUnderVolume, caught on purpose instead of by
// chance: tenant B's change is written just as tenant A's rewrite of all
// its 10,000 regex routes has been committed by the file source, so B's
// change follows A's whole round through the controller, translation and
// push. Each op writes a new version of A's file, waits for the file
// source's reload log line that commits it (validating the file is
// about 10 s of CPU), waits a further offset (0, 250, 500 or 1,000 ms
// in turn, so B's change meets A's round at its start, middle and end),
// rewrites B's file and waits until a delta ADS client of the Gateway
// reads a RouteConfiguration carrying B's new value, then until one
// carries A's, so every op starts from a quiet control plane.
//
// Metrics: p50-ms and max-ms of B's latency, write to ADS read (the
// bound stated in architecture/xds.md, "One tenant's volume");
// a-round-p50-ms, A's commit to ADS read of A's version (the round B's
// change waits behind); cpu-sec/op the process's CPU time per op (most of
// it validating A's file). Compare runs with benchstat:
//
//	go test -run '^$' -bench TenantChangeOnOtherTenantsCommit -benchtime 12x -count 6 ./pilot/pkg/bootstrap/
func BenchmarkTenantChangeOnOtherTenantsCommit(b *testing.B) {
	const aRoutes = 10000
	offsets := []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second}
	tb := startTenantBench(b, aRoutes)
	rds := tb.rds
	aTemplate := tenantARoutes(aRoutes, "A-VALUE")
	var bLat, aRound []time.Duration
	cpu0 := cputime.Process(b)
	i := 0
	for b.Loop() {
		i++
		av := fmt.Sprintf("a-%d-%d", tb.run, i)
		aSeen := rds.wait([]byte(av))
		// A commit signalled before this op's write (there is none: the
		// previous op waited for A's version to be served) is dropped.
		select {
		case <-tb.aCommits:
		default:
		}
		swapFile(b, tb.aFile, bytes.ReplaceAll(aTemplate, []byte("A-VALUE"), []byte(av)))
		var committed time.Time
		select {
		case committed = <-tb.aCommits:
		case <-time.After(10 * time.Minute):
			b.Fatalf("A's version %s not committed within 10 minutes", av)
		}
		off := offsets[(i-1)%len(offsets)]
		time.Sleep(off)
		bv := fmt.Sprintf("b-%d-%d", tb.run, i)
		bSeen := rds.wait([]byte(bv))
		start := time.Now()
		swapFile(b, tb.bFile, tenantBRoute(bv))
		bAt := rds.await(b, bSeen, bv, 10*time.Minute)
		aAt := rds.await(b, aSeen, av, 10*time.Minute)
		bLat = append(bLat, bAt.Sub(start))
		aRound = append(aRound, aAt.Sub(committed))
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "%s op %d: B written %v after A's commit, served in %v; A served %v after its commit\n",
				bAt.Format(time.RFC3339Nano), i, off, bAt.Sub(start), aAt.Sub(committed))
		}
	}
	b.ReportMetric((cputime.Process(b)-cpu0).Seconds()/float64(b.N), "cpu-sec/op")
	slices.Sort(bLat)
	slices.Sort(aRound)
	b.ReportMetric(ms(pct(bLat, 50)), "p50-ms")
	b.ReportMetric(ms(bLat[len(bLat)-1]), "max-ms")
	b.ReportMetric(ms(pct(aRound, 50)), "a-round-p50-ms")
	b.Logf("%d ops: B's change p50 %v, max %v; A's round p50 %v", len(bLat), pct(bLat, 50), bLat[len(bLat)-1], pct(aRound, 50))
}

// tenantBench is a running pilot-discovery in file mode with the two
// tenants of the benchmarks above and a delta ADS client of the seed's
// Gateway, both tenants' first versions served.
type tenantBench struct {
	rds          *rdsClient
	aFile, bFile string
	run          int64 // the run's start, a prefix of every value written
	// aCommits receives the time of each reload of the file source that
	// commits A's file (buffered: one commit waits to be read).
	aCommits chan time.Time
}

func startTenantBench(b *testing.B, aRoutes int) *tenantBench {
	dir := b.TempDir()
	writeTenantFolder(b, dir)
	aFile := filepath.Join(dir, "tenant-a", "routes.yaml")
	bFile := filepath.Join(dir, "tenant-b", "route.yaml")
	swapFile(b, aFile, tenantARoutes(aRoutes, "a-0"))
	swapFile(b, bFile, tenantBRoute("b-0"))

	var fh, xh slog.Handler = slog.DiscardHandler, slog.DiscardHandler
	if os.Getenv("TENANT_BENCH_LOG") != "" {
		fh = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
		xh = slog.NewTextHandler(os.Stderr, nil)
	}
	aCommits := make(chan time.Time, 1)
	flog := slog.New(reloadSignal{Handler: fh, file: filepath.Join("tenant-a", "routes.yaml"), reloads: aCommits})
	src, err := file.New(dir, file.Options{Logger: flog})
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewServer(Args{Files: src, Features: features.Defaults(),
		Debounce: xds.DefaultDebounce, MaxDelay: xds.DefaultMaxDelay, XDSLogger: slog.New(xh)})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, lis, nil, nil) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	rds := newRDSClient(b, lis.Addr().String())
	run := time.Now().UnixNano()
	// Both tenants' first versions served: the start is over.
	a0, b0 := rds.wait([]byte("a-0")), rds.wait([]byte("b-0"))
	rds.await(b, a0, "a-0", 10*time.Minute)
	rds.await(b, b0, "b-0", time.Minute)
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "started in %v\n", time.Since(time.Unix(0, run)))
	}
	return &tenantBench{rds: rds, aFile: aFile, bFile: bFile, run: run, aCommits: aCommits}
}

// reloadSignal passes the file source's log on to Handler and sends the
// time on reloads (without waiting) each time the source logs a reload
// that committed file (a path relative to the folder; the log may name
// it relative or absolute).
type reloadSignal struct {
	slog.Handler
	file    string
	reloads chan<- time.Time
}

func (h reloadSignal) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.Handler.Enabled(ctx, l)
}

func (h reloadSignal) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "file: reloaded" {
		at := time.Now()
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "files" && slices.ContainsFunc(strings.Split(a.Value.String(), ", "), func(f string) bool {
				return f == h.file || strings.HasSuffix(f, string(filepath.Separator)+h.file)
			}) {
				select {
				case h.reloads <- at:
				default:
				}
				return false
			}
			return true
		})
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h reloadSignal) WithAttrs(as []slog.Attr) slog.Handler {
	return reloadSignal{Handler: h.Handler.WithAttrs(as), file: h.file, reloads: h.reloads}
}

func (h reloadSignal) WithGroup(name string) slog.Handler {
	return reloadSignal{Handler: h.Handler.WithGroup(name), file: h.file, reloads: h.reloads}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the nearest-rank p-th percentile of sorted.
func pct(sorted []time.Duration, p int) time.Duration {
	k := (len(sorted)*p + 99) / 100
	return sorted[max(k, 1)-1]
}

// writeTenantFolder writes the seed's namespaces and Gateway, the tenants'
// namespaces and one Service each (their routes' backend).
func writeTenantFolder(b *testing.B, dir string) {
	seed := filepath.Join("..", "..", "..", "examples", "seed")
	for _, f := range []string{"00-namespaces.yaml", "40-gateway.yaml"} {
		data, err := os.ReadFile(filepath.Join(seed, f))
		if err != nil {
			b.Fatal(err)
		}
		write(b, filepath.Join(dir, f), string(data))
	}
	for _, t := range []string{"tenant-a", "tenant-b"} {
		write(b, filepath.Join(dir, t, "service.yaml"), fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Service
metadata:
  name: backend
  namespace: %[1]s
spec:
  selector:
    app: backend
  ports:
  - port: 8000
`, t))
	}
}

// tenantARoutes is tenant A's file: n HTTPRoutes on the seed's Gateway,
// route i on host a-(i%100).example.com with one rule matching the path
// regular expression ^/v1/models/m-i(/.*)?$ and setting header x-version
// to value.
func tenantARoutes(n int, value string) []byte {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r-%05[1]d
  namespace: tenant-a
spec:
  parentRefs:
  - name: gateway
    namespace: gateway-namespace
  hostnames:
  - a-%02[2]d.example.com
  rules:
  - matches:
    - path:
        type: RegularExpression
        value: ^/v1/models/m-%05[1]d(/.*)?$
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set:
        - name: x-version
          value: %[3]s
    backendRefs:
    - name: backend
      port: 8000
`, i, i%100, value)
	}
	return []byte(sb.String())
}

// tenantBRoute is tenant B's file: one HTTPRoute on b.example.com setting
// header x-version to value.
func tenantBRoute(value string) []byte {
	return fmt.Appendf(nil, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: api
  namespace: tenant-b
spec:
  parentRefs:
  - name: gateway
    namespace: gateway-namespace
  hostnames:
  - b.example.com
  rules:
  - matches:
    - path:
        type: RegularExpression
        value: ^/v1/chat(/.*)?$
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set:
        - name: x-version
          value: %s
    backendRefs:
    - name: backend
      port: 8000
`, value)
}

// swapFile writes data beside path, then renames it over path.
func swapFile(b *testing.B, path string, data []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Error(err)
		return
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		b.Error(err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Error(err)
	}
}

// rdsClient is a delta ADS stream of the seed Gateway's proxy, subscribed
// to every route configuration. Its reader stamps and acks each response
// and looks in each route configuration's bytes for the values waited on.
type rdsClient struct {
	mu      sync.Mutex
	waiting map[string]chan time.Time // value -> when first seen
	errs    chan error
	// Tenant A's versions: aPrefix then the version number; when each was
	// written, the newest served, and each served version's lag.
	aPrefix  []byte
	aWritten map[int]time.Time
	aNewest  int
	aLag     []time.Duration
}

func newRDSClient(b *testing.B, addr string) *rdsClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		b.Fatal(err)
	}
	md, err := structpb.NewStruct(map[string]any{xds.MetadataGatewayNamespace: "gateway-namespace", xds.MetadataGatewayName: "gateway"})
	if err != nil {
		b.Fatal(err)
	}
	node := &corev3.Node{Id: "tenant-bench", Metadata: md}
	if err := stream.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.RouteType}); err != nil {
		b.Fatal(err)
	}
	c := &rdsClient{waiting: map[string]chan time.Time{}, errs: make(chan error, 1)}
	var done sync.WaitGroup
	done.Go(func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				c.errs <- err
				return
			}
			at := time.Now()
			if err := stream.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}); err != nil {
				c.errs <- err
				return
			}
			c.seen(r, at)
		}
	})
	b.Cleanup(func() { cancel(); done.Wait() })
	return c
}

// seen signals every value waited on that r's resources carry, and notes
// a newer version of tenant A's routes.
func (c *rdsClient) seen(r *discoveryv3.DeltaDiscoveryResponse, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, res := range r.GetResources() {
		body := res.GetResource().GetValue()
		for v, ch := range c.waiting {
			if bytes.Contains(body, []byte(v)) {
				ch <- at
				delete(c.waiting, v)
			}
		}
		if c.aPrefix == nil {
			continue
		}
		if i := bytes.Index(body, c.aPrefix); i >= 0 {
			rest := body[i+len(c.aPrefix):]
			n := 0
			for len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9' {
				n = n*10 + int(rest[0]-'0')
				rest = rest[1:]
			}
			if n > c.aNewest {
				c.aNewest = n
				if w, ok := c.aWritten[n]; ok {
					c.aLag = append(c.aLag, at.Sub(w))
					if testing.Verbose() {
						fmt.Fprintf(os.Stderr, "%s A version %d served, %v after its write\n", at.Format(time.RFC3339Nano), n, at.Sub(w))
					}
				}
			}
		}
	}
}

// wait registers value and returns the channel its sighting is sent on.
func (c *rdsClient) wait(value []byte) chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.waiting[string(value)] = ch
	c.mu.Unlock()
	return ch
}

// await returns when a response carrying value (registered with wait as
// ch) was read.
func (c *rdsClient) await(b *testing.B, ch chan time.Time, value string, d time.Duration) time.Time {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case at := <-ch:
		return at
	case err := <-c.errs:
		b.Fatalf("delta stream ended: %v", err)
	case <-t.C:
		b.Fatalf("%s not served within %v", value, d)
	}
	return time.Time{}
}

// trackA makes the client note tenant A's versions: prefix followed by
// the version number.
func (c *rdsClient) trackA(prefix []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aPrefix, c.aWritten = prefix, map[int]time.Time{}
}

// wroteA records that A's version n is being written now.
func (c *rdsClient) wroteA(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aWritten[n] = time.Now()
}

// aServed is how many of A's versions were served (a version overtaken
// before being served is not).
func (c *rdsClient) aServed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.aLag)
}

// aLags are the served versions' lags, write to ADS read, sorted.
func (c *rdsClient) aLags() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.aLag)
	slices.Sort(out)
	return out
}
