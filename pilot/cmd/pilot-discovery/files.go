// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/infermesh/infermesh/pilot/pkg/bootstrap"
	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// openFiles reads the manifests of dir for discovery's file mode; log
// gets each problem found (file, document, object, field), so a user sees
// at once what was left out, and one line per reload. Only an unreadable
// dir is an error; bad manifests are not.
func openFiles(dir string, log *slog.Logger, feats features.Features) (*file.Source, error) {
	src, err := file.New(dir, fileOptions(log, feats))
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	return src, nil
}

// fileOptions are the file-mode source's options under feats: its logger
// and the Gateway API channel (PILOT_FILE_GATEWAY_API_CHANNEL).
func fileOptions(log *slog.Logger, feats features.Features) file.Options {
	return file.Options{Logger: log, GatewayAPIChannel: file.Channel(feats.FileGatewayAPIChannel)}
}

// fileSource is proxy-config's offline source (-f DIR): it runs the whole
// pipeline of discovery -f in process, ADS included, on an in-memory
// listener (no port is opened), and fetches the Gateway's configuration
// through it exactly as adsSource does from a running server. So offline
// and online output cannot differ by more than their inputs do.
type fileSource struct {
	paths     []string
	stdin     io.Reader
	lookupEnv func(string) (string, bool)
	// problems are the manifests left out by the last Fetch, each file
	// named as given.
	problems []file.Problem
}

var _ configSource = (*fileSource)(nil)

// Fetch implements configSource. Besides adsSource's errors: an unreadable
// folder, invalid feature flags, a Gateway that is not one of ours in the
// folder, or one the translator refuses for its parameters (GatewayClass or
// Gateway parameters, addresses); both are named at once, without waiting
// for the timeout.
func (s *fileSource) Fetch(ctx context.Context, gw gatewayRef) (proxyResources, error) {
	feats, err := features.Load(s.lookupEnv)
	if err != nil {
		return proxyResources{}, fmt.Errorf("environment: %w", err)
	}
	m, err := stageManifests(s.paths, s.stdin)
	if err != nil {
		return proxyResources{}, err
	}
	defer m.cleanup()
	// Problems are printed once by the command, not logged.
	src, err := file.New(m.dir, fileOptions(slog.New(slog.DiscardHandler), feats))
	if err != nil {
		return proxyResources{}, fmt.Errorf("-f: %w", err)
	}
	s.problems = m.problems(src)
	dir := strings.Join(s.paths, ", ")
	p, err := startInProcess(ctx, src, feats, dir)
	if err != nil {
		return proxyResources{}, err
	}
	defer p.stop()
	var mg *model.Gateway
	if t := p.srv.Controller().Models; t != nil {
		mg = t.GetKey(gw.String())
	}
	if mg == nil {
		return proxyResources{}, fmt.Errorf("gateway %s: not a Gateway of ours in %s (check its gatewayClassName, and `pilot-discovery check -f %s`)",
			gw, dir, strings.Join(s.paths, " -f "))
	}
	if mg.ClassParametersError != "" {
		// The translator refuses it: no configuration would ever come.
		return proxyResources{}, fmt.Errorf("gateway %s: refused, so its proxies get no configuration: %s (its status says "+
			"Accepted=False; see `pilot-discovery check -f %s`)", gw, mg.ClassParametersError, strings.Join(s.paths, " -f "))
	}
	return p.ads().Fetch(ctx, gw)
}

// inProcess is the whole pipeline of discovery -f run in process over a
// Source, ADS included, on an in-memory listener (no port is opened).
type inProcess struct {
	srv *bootstrap.Server
	lis *bufconn.Listener
	// stop ends the server and waits for it.
	stop func()
}

// startInProcess builds and runs discovery -f's server over src until ctx
// ends or stop is called, and returns once its first configuration is
// published (every collection synced). dir names the manifests in errors.
func startInProcess(ctx context.Context, src *file.Source, feats features.Features, dir string) (*inProcess, error) {
	srv, err := bootstrap.NewServer(bootstrap.Args{Files: src, Features: feats, Debounce: time.Millisecond, MaxDelay: 10 * time.Millisecond,
		XDSLogger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	lis := bufconn.Listen(1 << 20)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx, lis, nil, nil) }()
	p := &inProcess{srv: srv, lis: lis, stop: sync.OnceFunc(func() { cancel(); <-done })}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !srv.XDS().Ready() {
		select {
		case <-ctx.Done():
			p.stop()
			return nil, fmt.Errorf("-f %s: configuration not computed: %w", dir, context.Cause(ctx))
		case err := <-done:
			cancel()
			return nil, fmt.Errorf("-f %s: %w", dir, err)
		case <-tick.C:
		}
	}
	return p, nil
}

// ads is a client of p's ADS server, as a proxy connects to discovery -f.
func (p *inProcess) ads() *adsSource {
	return &adsSource{address: "passthrough:///file", creds: insecure.NewCredentials(),
		dial: func(ctx context.Context, _ string) (net.Conn, error) { return p.lis.DialContext(ctx) }}
}
