// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/infermesh/infermesh/pilot/pkg/bootstrap"
	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// openFiles reads the manifests of dir for file mode and logs each problem
// found (file, document, object, field), so a user sees at once what was
// left out. Only an unreadable dir is an error; bad manifests are not.
func openFiles(dir string) (*file.Source, error) {
	src, err := file.New(dir, file.Options{})
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	return src, nil
}

// fileSource is proxy-config's offline source (-f DIR): it runs the whole
// pipeline of discovery -f in process, ADS included, on an in-memory
// listener (no port is opened), and fetches the Gateway's configuration
// through it exactly as adsSource does from a running server. So offline
// and online output cannot differ by more than their inputs do.
type fileSource struct {
	dir       string
	lookupEnv func(string) (string, bool)
}

var _ configSource = (*fileSource)(nil)

// Fetch implements configSource. Besides adsSource's errors: an unreadable
// folder, invalid feature flags, or a Gateway that is not one of ours in
// the folder (named at once, without waiting for the timeout).
func (s *fileSource) Fetch(ctx context.Context, gw gatewayRef) (core.Resources, error) {
	feats, err := features.Load(s.lookupEnv)
	if err != nil {
		return core.Resources{}, fmt.Errorf("environment: %w", err)
	}
	src, err := openFiles(s.dir)
	if err != nil {
		return core.Resources{}, err
	}
	srv, err := bootstrap.NewServer(bootstrap.Args{Files: src, Features: feats, Debounce: time.Millisecond, MaxDelay: 10 * time.Millisecond})
	if err != nil {
		return core.Resources{}, err
	}
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, lis, nil, nil) }()
	defer func() { cancel(); <-done }()
	// Ready is true once every collection has synced and the first
	// configuration is published.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !srv.XDS().Ready() {
		select {
		case <-ctx.Done():
			return core.Resources{}, fmt.Errorf("-f %s: configuration not computed: %w", s.dir, context.Cause(ctx))
		case err := <-done:
			return core.Resources{}, fmt.Errorf("-f %s: %w", s.dir, err)
		case <-tick.C:
		}
	}
	if t := srv.Controller().Translator; t == nil || t.GetKey(gw.String()) == nil {
		return core.Resources{}, fmt.Errorf("gateway %s: not a Gateway of ours in %s (check its gatewayClassName, and `pilot-discovery status -f %s`)", gw, s.dir, s.dir)
	}
	ads := &adsSource{address: "passthrough:///" + s.dir, creds: insecure.NewCredentials(),
		dial: func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }}
	return ads.Fetch(ctx, gw)
}
