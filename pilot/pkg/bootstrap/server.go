// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	registry "github.com/infermesh/infermesh/pilot/pkg/serviceregistry/kube"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/leaderelection"
)

// Args configure a Server.
type Args struct {
	// Client is the cluster connection. Exactly one of Client and Files is
	// set.
	Client *kube.Client
	// Files is file mode's source (pilot-discovery -f DIR): manifests read
	// from a folder. There is no leader election and nothing is written;
	// shadow Services are fed to the service registry in process, and
	// Services without EndpointSlices get endpoints from the Pods they
	// select (pkg/kube/endpointslice).
	Files *file.Source
	// Features are the feature flags (features.Load(os.LookupEnv)).
	Features features.Features
	// IsLeader gates the controller's writes. Nil means: run leader
	// election on the Lease LeaseNamespace/LeaseName.
	IsLeader func() bool
	// LeaseNamespace and LeaseName name the leader-election Lease (default
	// istio-system / infermesh-gateway-controller).
	LeaseNamespace, LeaseName string
	// Debounce and MaxDelay bound push coalescing (xds.Config).
	Debounce, MaxDelay time.Duration
	// Translate are the xDS translator's knobs; InferenceEnabled and
	// ClusterDomain are taken from Features.
	Translate core.Options
	// GRPCOptions are passed to the ADS server's grpc.NewServer: transport
	// credentials (ADS over TLS) and stream interceptors (proxy
	// authentication). Nil serves plaintext with no authentication.
	GRPCOptions []grpc.ServerOption
	// XDSLogger is the ADS server's logger (push, NACK and stream lines);
	// nil is slog.Default(). proxy-config -f discards it: its in-process
	// server's pushes are no news to the user.
	XDSLogger *slog.Logger
}

// Server is a running pilot-discovery over a cluster.
type Server struct {
	args       Args
	krtDebug   *krt.DebugHandler
	registry   *prometheus.Registry
	controller *gateway.Controller
	xds        *xds.Server
	elector    *leaderelection.Elector
	events     record.EventBroadcaster // nil in file mode
	// serving is the feed from the ADS server's push path (what it does not
	// serve of each Gateway) to the controller's Gateway status.
	serving krt.StaticCollection[model.GatewayServing]
	stop    chan struct{}
}

// NewServer builds every stage; nothing runs until Run.
func NewServer(args Args) (*Server, error) {
	if (args.Client == nil) == (args.Files == nil) {
		return nil, errors.New("bootstrap: set exactly one of Args.Client and Args.Files")
	}
	s := &Server{args: args, krtDebug: krt.NewDebugHandler(), registry: prometheus.NewRegistry(), stop: make(chan struct{})}
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := krt.RegisterMetrics(s.registry); err != nil {
		return nil, fmt.Errorf("bootstrap: krt metrics: %w", err)
	}
	opts := []krt.CollectionOption{krt.WithStop(s.stop), krt.WithDebugging(s.krtDebug)}
	s.serving = krt.NewStaticCollection[model.GatewayServing](nil, nil, append(opts, krt.WithName("xds/GatewayServing"))...)
	var reg registry.Outputs
	if args.Files != nil {
		s.controller, reg = fileMode(args.Files, args.Features, opts)
	} else {
		var err error
		if s.controller, reg, err = s.clusterMode(opts); err != nil {
			return nil, err
		}
	}
	c := s.controller
	gateways := c.Translator
	if gateways == nil { // Gateway API off: serve nothing, but serve.
		gateways = krt.NewStaticCollection[model.Gateway](nil, nil, opts...)
	}
	translate := args.Translate
	translate.InferenceEnabled = args.Features.EnableInferenceExtension
	translate.ClusterDomain = args.Features.ClusterDomain
	var err error
	// The certificates of HTTPS listeners, served over SDS.
	var secrets krt.Collection[*corev1.Secret]
	if args.Files != nil {
		secrets = args.Files.Secrets()
	} else {
		secrets = args.Client.Secrets()
	}
	s.xds, err = xds.NewServer(xds.Config{
		Gateways: gateways, Endpoints: reg.Endpoints, Translate: translate, Secrets: secrets,
		Debounce: args.Debounce, MaxDelay: args.MaxDelay, Registry: s.registry, KrtDebug: s.krtDebug,
		GRPCOptions: args.GRPCOptions, Serving: s.serving, Logger: args.XDSLogger,
	})
	if err != nil {
		if s.events != nil {
			s.events.Shutdown()
		}
		return nil, err
	}
	return s, nil
}

// clusterMode builds stages 2 and 3 over the cluster: the controller with
// its writers (leader-gated by Args.IsLeader, or by leader election on the
// Lease) and the service registry over the informers.
func (s *Server) clusterMode(opts []krt.CollectionOption) (*gateway.Controller, registry.Outputs, error) {
	args := s.args
	isLeader := args.IsLeader
	if isLeader == nil {
		ns, name := args.LeaseNamespace, args.LeaseName
		if ns == "" {
			ns = "istio-system"
		}
		if name == "" {
			name = "infermesh-gateway-controller"
		}
		e, err := leaderelection.New(leaderelection.Config{Client: args.Client.Kube(), Namespace: ns, Name: name})
		if err != nil {
			return nil, registry.Outputs{}, err
		}
		s.elector, isLeader = e, e.IsLeader
	}
	// Warning events (a shadow Service or Gateway deployment name taken by
	// an object we do not own) go to the API server; Run shuts the
	// broadcaster down.
	s.events = record.NewBroadcaster()
	s.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: args.Client.Kube().CoreV1().Events("")})
	recorder := s.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "pilot-discovery"})
	c, err := gateway.NewController(gateway.ControllerConfig{
		Client: args.Client, Features: args.Features, IsLeader: isLeader, Recorder: recorder, Krt: opts,
		Serving: s.serving,
	})
	if err != nil {
		s.events.Shutdown()
		return nil, registry.Outputs{}, err
	}
	kc := args.Client
	reg := registry.Build(registry.Inputs{Services: kc.Services(), EndpointSlices: kc.EndpointSlices()},
		registry.Options{ClusterDomain: args.Features.ClusterDomain, Krt: opts})
	return c, reg, nil
}

// Controller returns the Gateway API and InferencePool controller.
func (s *Server) Controller() *gateway.Controller { return s.controller }

// XDS returns the ADS server.
func (s *Server) XDS() *xds.Server { return s.xds }

// Run starts the informers, the writers (under leader election unless
// Args.IsLeader was given) and the ADS server on ads, and serves
// MonitoringHandler on httpLis and DebugHandler on debugLis, each when it is
// not nil (http.go says which belongs where). It returns when ctx ends and
// everything has stopped, or with the first serving error.
func (s *Server) Run(ctx context.Context, ads, httpLis, debugLis net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	if s.args.Files != nil {
		wg.Go(func() {
			if err := s.args.Files.Run(ctx); err != nil {
				errs <- fmt.Errorf("watching manifests: %w", err)
			}
		})
	} else {
		s.args.Client.Start(s.stop)
	}
	runs := s.controller.RunFunctions()
	if s.elector != nil {
		for _, r := range runs {
			s.elector.AddRunFunction(r)
		}
		wg.Go(func() { s.elector.Run(ctx) })
	} else {
		for _, r := range runs {
			wg.Go(func() { r(ctx) })
		}
	}
	wg.Go(func() {
		if err := s.xds.Run(ctx, ads); err != nil {
			errs <- fmt.Errorf("ADS server: %w", err)
		}
	})
	wg.Go(func() { s.releaseStartupMemory(ctx) })
	if httpLis != nil {
		serveHTTP(ctx, &wg, errs, "HTTP server", httpLis, s.MonitoringHandler())
	}
	if debugLis != nil {
		serveHTTP(ctx, &wg, errs, "debug HTTP server", debugLis, s.DebugHandler())
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
		slog.Error("bootstrap: stopping", "error", err)
	}
	cancel()
	wg.Wait()
	close(s.stop)
	if s.events != nil {
		s.events.Shutdown()
	}
	if s.args.Client != nil {
		s.args.Client.Shutdown()
	}
	return err
}

// releaseStartupMemory hands the startup's garbage back to the operating
// system, twice: when the first configuration is published, and again the
// first time the process is quiet (quietCPU or less over quietWindow),
// which is when the initial status writes, shadow Service applies and
// pushes are over; it stops watching after quietDeadline. Each release is
// debug.FreeOSMemory (a collection, then a scavenge) and
// releaseBinaryPages (the executable's pages that startup mapped).
// Startup decodes every input at once; without this the runtime keeps that
// peak resident (its scavenger stops at the heap goal, twice the live heap
// by default), which is what an operator's RSS graph would show.
func (s *Server) releaseStartupMemory(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !s.xds.Ready() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	releaseMemory("first publish")
	if waitQuiet(ctx, quietWindow, quietCPU, quietDeadline, time.Second, processCPU) {
		releaseMemory("startup settled")
	}
}

// The quiet point after startup: at most quietCPU of CPU time over
// quietWindow, looked for until quietDeadline after the first publish.
const (
	quietWindow   = 10 * time.Second
	quietCPU      = 100 * time.Millisecond
	quietDeadline = 10 * time.Minute
)

// waitQuiet reports whether the process used at most cpu of CPU time in
// some window of length window (used, the CPU time so far, is read every
// tick) within deadline; false when ctx ends, the deadline passes, or used
// fails.
func waitQuiet(ctx context.Context, window, cpu, deadline, tick time.Duration, used func() (time.Duration, bool)) bool {
	type sample struct {
		at  time.Time
		cpu time.Duration
	}
	var samples []sample
	end := time.Now().Add(deadline)
	t := time.NewTicker(tick)
	defer t.Stop()
	for time.Now().Before(end) {
		total, ok := used()
		if !ok {
			return false
		}
		now := time.Now()
		samples = append(samples, sample{now, total})
		for len(samples) > 1 && now.Sub(samples[1].at) >= window {
			samples = samples[1:]
		}
		if first := samples[0]; now.Sub(first.at) >= window && total-first.cpu <= cpu {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return false
}

// releaseMemory returns free heap and the executable's read-only pages to
// the operating system, logging what it did at debug level.
func releaseMemory(when string) {
	debug.FreeOSMemory()
	n, err := releaseBinaryPages()
	if err != nil {
		slog.Warn("bootstrap: releasing the executable's pages", "when", when, "error", err)
		return
	}
	slog.Debug("bootstrap: released free heap and the executable's pages", "when", when, "binaryMiB", n>>20)
}
