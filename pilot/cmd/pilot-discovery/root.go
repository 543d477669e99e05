// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/version"
)

func newRootCommand() *cobra.Command { return newRootCommandWith(defaultDeps()) }

// newRootCommandWith is the command tree over d (tests pass fakes).
func newRootCommandWith(d deps) *cobra.Command {
	root := &cobra.Command{
		Use:   "pilot-discovery",
		Short: "infermesh control plane for Gateway API Inference Extension traffic",
		Long: "pilot-discovery turns Gateways, HTTPRoutes and InferencePools into Envoy configuration:\n" +
			"each request on a pool's route goes through the pool's Endpoint Picker (ext_proc) and then\n" +
			"to the pod:port it picked (OverrideHost load balancing).\n\n" + features.Usage(),
		SilenceUsage: true,
		// main prints the error once.
		SilenceErrors: true,
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "pilot-discovery", version.Version)
		},
	})
	root.AddCommand(newDiscoveryCommand(d), newProxyConfigCommand(d), newProxyStatusCommand(), newStatusCommand(d))
	return root
}
