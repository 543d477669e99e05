// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	sotwv3 "github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Defaults of Config's push timing.
const (
	DefaultDebounce = 100 * time.Millisecond
	DefaultMaxDelay = time.Second
)

// Config configures a Server. Gateways and Endpoints are required.
type Config struct {
	// Gateways are the controller's translated Gateways, keyed
	// "namespace/name".
	Gateways krt.Collection[model.Gateway]
	// Endpoints are the service registry's ready endpoints per EDS cluster,
	// keyed by cluster name.
	Endpoints krt.Collection[model.ClusterEndpoints]
	// Secrets are the Kubernetes Secrets, keyed namespace/name: the
	// certificates of HTTPS listeners, served over SDS to the proxies of
	// the Gateways whose listeners name them. nil serves none (an HTTPS
	// listener then warms for ever on its proxies).
	Secrets krt.Collection[*corev1.Secret]
	// Translate are the xDS translator's knobs.
	Translate core.Options
	// Serving, when set, receives per Gateway what the push path does not
	// serve as translated (the controller's Gateway status reads it).
	Serving ServingSink

	// Debounce is the quiet period that ends a burst of changes (default
	// DefaultDebounce); MaxDelay bounds how long any change waits (default
	// DefaultMaxDelay). A change after Debounce without a push goes out at
	// once. MaxDelay must not be less than Debounce.
	Debounce, MaxDelay time.Duration

	// Registry, when set, receives the server's metrics and is served on
	// /metrics.
	Registry *prometheus.Registry
	// KrtDebug, when set, is passed to the server's collections and served
	// on /debug/krtz.
	KrtDebug *krt.DebugHandler
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// GRPCOptions are passed to grpc.NewServer.
	GRPCOptions []grpc.ServerOption
}

func (c *Config) validate() error {
	var errs []error
	if c.Gateways == nil {
		errs = append(errs, errors.New("field Gateways is required"))
	}
	if c.Endpoints == nil {
		errs = append(errs, errors.New("field Endpoints is required"))
	}
	if c.Debounce < 0 || c.MaxDelay < 0 {
		errs = append(errs, errors.New("fields Debounce and MaxDelay must not be negative"))
	}
	if c.Debounce == 0 {
		c.Debounce = DefaultDebounce
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	if c.MaxDelay < c.Debounce {
		errs = append(errs, fmt.Errorf("field MaxDelay %s is less than Debounce %s", c.MaxDelay, c.Debounce))
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return errors.Join(errs...)
}

// Server is the ADS server: go-control-plane's state-of-the-world and delta
// stream servers over our Cache, fed by the push path.
type Server struct {
	cfg     Config
	metrics *metrics
	cache   *Cache
	tracker *tracker
	serving *servingStatus
	started atomic.Bool
	// mutate is handed to the push path (tests only).
	mutate func(gateway string, res *core.Resources)
}

// NewServer validates cfg and returns a Server; nothing runs until Run. It
// fails on an invalid Config or when the metrics cannot be registered on
// cfg.Registry (for example, registered twice).
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("xds: invalid config: %w", err)
	}
	m := newMetrics()
	if cfg.Registry != nil {
		if err := m.register(cfg.Registry); err != nil {
			return nil, fmt.Errorf("xds: registering metrics: %w", err)
		}
	}
	serving := newServingStatus(m, cfg.Serving)
	t := newTracker(cfg.Logger, m, cfg.Clock)
	t.refused = serving.get
	return &Server{
		cfg: cfg, metrics: m,
		cache:   newCache(cfg.Logger, m),
		tracker: t,
		serving: serving,
	}, nil
}

// Cache returns the server's configuration cache.
func (s *Server) Cache() *Cache { return s.cache }

// Ready reports whether the first configuration was published: every input
// collection has synced and proxies are being answered. It says nothing of
// whether every Gateway is served in full (see RefusedGateways).
func (s *Server) Ready() bool { return s.cache.Synced() }

// RefusedGateways returns, per Gateway ("namespace/name") of which some
// part of the translation is not served as translated, how many parts.
func (s *Server) RefusedGateways() map[string]int { return s.serving.counts() }

// Run builds the per-Gateway and per-cluster collections, starts the push
// path, and serves ADS (envoy.service.discovery.v3.AggregatedDiscoveryService:
// StreamAggregatedResources and DeltaAggregatedResources) on lis until ctx is
// done. It then stops the gRPC server (open streams end), the push path and
// the collections, and returns nil; or the error that stopped serving. Run
// may be called once.
func (s *Server) Run(ctx context.Context, lis net.Listener) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("xds: Server.Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	opts := []krt.CollectionOption{krt.WithStop(ctx.Done())}
	if s.cfg.KrtDebug != nil {
		opts = append(opts, krt.WithDebugging(s.cfg.KrtDebug))
	}
	translators := newGatewayTranslators(s.cfg.Translate)
	gateways := krt.NewCollection(s.cfg.Gateways, translators.builder(),
		append(opts, krt.WithName("xds/GatewayResources"))...)
	endpoints := krt.NewCollection(s.cfg.Endpoints, EndpointBuilder(),
		append(opts, krt.WithName("xds/EndpointResources"))...)

	secrets := s.cfg.Secrets
	if secrets == nil {
		secrets = krt.NewStaticCollection[*corev1.Secret](nil, nil, append(opts, krt.WithName("xds/NoSecrets"))...)
	}
	p := newPusher(s.cfg.Logger, s.metrics, s.cfg.Clock, s.cache, s.serving, gateways, endpoints, secrets)
	p.mutate = s.mutate
	p.forget = translators.forget
	p.proxies = s.tracker.proxiesOf
	gwReg := gateways.RegisterBatch(p.gatewaysChanged, true)
	epReg := endpoints.RegisterBatch(p.endpointsChanged, true)
	sdsReg := secrets.RegisterBatch(p.secretsChanged, true)
	defer gwReg.UnregisterHandler()
	defer epReg.UnregisterHandler()
	defer sdsReg.UnregisterHandler()
	syncers := []krt.Syncer{s.cfg.Gateways, s.cfg.Endpoints, secrets, gateways, endpoints, gwReg, epReg, sdsReg}
	d := &debouncer{quiet: s.cfg.Debounce, maxDelay: s.cfg.MaxDelay, clock: s.cfg.Clock}
	pushDone := make(chan struct{})
	go func() {
		defer close(pushDone)
		p.run(ctx, syncers, d)
	}()

	xdsServer := serverv3.NewServer(ctx, s.cache, streamCallbacks{tracker: s.tracker, cache: s.cache},
		sotwv3.WithOrderedADS(), sotwv3.WithLogger(slogAdapter{s.cfg.Logger}))
	gs := grpc.NewServer(s.cfg.GRPCOptions...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, xdsServer)

	serveErr := make(chan error, 1)
	go func() { serveErr <- gs.Serve(lis) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		cancel()
	}
	// ctx is done: the stream servers return, so GracefulStop ends quickly;
	// Stop bounds it anyway.
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	t := s.cfg.Clock.NewTimer(5 * time.Second)
	select {
	case <-stopped:
		t.Stop()
	case <-t.C():
		gs.Stop()
		<-stopped
	}
	<-pushDone
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// slogAdapter is go-control-plane's log.Logger over slog. Its per-request
// chatter (stale nonces, new subscriptions) goes to Debug.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Debugf(f string, args ...any) { a.l.Debug(fmt.Sprintf(f, args...)) }
func (a slogAdapter) Infof(f string, args ...any)  { a.l.Debug(fmt.Sprintf(f, args...)) }
func (a slogAdapter) Warnf(f string, args ...any)  { a.l.Warn(fmt.Sprintf(f, args...)) }
func (a slogAdapter) Errorf(f string, args ...any) { a.l.Error(fmt.Sprintf(f, args...)) }
