// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/infermesh/infermesh/demo/traffic"
)

func main() {
	repo := flag.String("repo", ".", "the repository's root (examples/seed is read from it)")
	requests := flag.Int("requests", 3, "how many of the seed's requests to send while the EPP runs")
	checkOnly := flag.Bool("check-privileges", false, "only check that network namespaces can be made here")
	flag.Parse()
	if err := traffic.CheckPrivileges(); err != nil {
		fmt.Fprintf(os.Stderr, "demo-traffic: this machine cannot make network namespaces: %v\n", err)
		os.Exit(3)
	}
	if *checkOnly {
		return
	}
	// The harnesses find the CRDs' modules with `go list -m`, which needs the
	// repository's go.mod around the working folder.
	if err := os.Chdir(*repo); err != nil {
		fmt.Fprintf(os.Stderr, "demo-traffic: -repo: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := traffic.Run(ctx, traffic.Config{
		Repo: ".", Out: os.Stdout, Log: os.Stderr,
		EnvoyBinary: os.Getenv("ENVOY_BINARY"), Requests: *requests,
	})
	switch {
	case errors.Is(err, traffic.ErrInterrupted):
		os.Exit(130)
	case err != nil:
		fmt.Fprintf(os.Stderr, "demo-traffic: %v\n", err)
		os.Exit(1)
	}
}
