// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/version"
)

// app is what every subcommand shares: its surroundings and the logger the
// root command builds from --log-format and --log-level before any
// subcommand runs.
type app struct {
	deps
	logOpts logOptions
	log     *slog.Logger
}

// logWriter is where logs go: deps.stderr, else the command's stderr.
func (a *app) logWriter(cmd *cobra.Command) io.Writer {
	if a.stderr != nil {
		return a.stderr
	}
	return cmd.ErrOrStderr()
}

func newRootCommand() *cobra.Command { return newRootCommandWith(defaultDeps()) }

// newRootCommandWith is the command tree over d (tests pass fakes).
func newRootCommandWith(d deps) *cobra.Command {
	a := &app{deps: d}
	root := &cobra.Command{
		Use:   "pilot-discovery",
		Short: "infermesh control plane for Gateway API Inference Extension traffic",
		Long: "pilot-discovery turns Gateways, HTTPRoutes and InferencePools into Envoy configuration:\n" +
			"each request on a pool's route goes through the pool's Endpoint Picker (ext_proc) and then\n" +
			"to the pod:port it picked (OverrideHost load balancing).\n\n" + features.Usage(),
		Version:      version.Version,
		SilenceUsage: true,
		// main prints the error once.
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.logOpts.validate(); err != nil {
				return err
			}
			level, _ := parseLogLevel(a.logOpts.level)
			a.log = newLogger(a.logWriter(cmd), a.logOpts.format, level)
			useLogger(a.log)
			return nil
		},
	}
	root.SetVersionTemplate("pilot-discovery {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&a.logOpts.format, "log-format", logFormatJSON, "log format on stderr: json (one object per line) or text (key=value)")
	pf.StringVar(&a.logOpts.level, "log-level", "info", "log level: debug, info, warn or error")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "pilot-discovery", version.Version)
		},
	})
	root.AddCommand(newDiscoveryCommand(a), newProxyConfigCommand(a), newProxyStatusCommand(), newStatusCommand(a), newCheckCommand(a))
	return root
}
