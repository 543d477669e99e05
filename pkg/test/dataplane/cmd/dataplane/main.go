// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/infermesh/infermesh/pkg/test/dataplane"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "dataplane: %v\n", err)
		stop()
		os.Exit(1)
	}
}

// run starts the data plane as the command line says and serves until ctx
// ends; logs go to logOut.
func run(ctx context.Context, argv []string, logOut io.Writer) error {
	a, err := parseArgs(argv)
	if err != nil {
		return err
	}
	boot, err := os.ReadFile(a.configPath)
	if err != nil {
		return fmt.Errorf("--config-path: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(logOut, nil))
	dp, err := dataplane.New(boot, dataplane.Options{
		BindListenerAddresses: true,
		ServiceNode:           a.serviceNode,
		Logger:                logger,
	})
	if err != nil {
		return err
	}
	logger.Info("dataplane: starting", "config", a.configPath, "serviceNode", a.serviceNode)
	err = dp.Run(ctx)
	logger.Info("dataplane: stopped")
	return err
}
