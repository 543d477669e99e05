// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
)

// errManifestProblems is returned after the statuses are printed when some
// manifests were left out; the problems themselves go to stderr.
var errManifestProblems = errors.New("some manifests were left out (listed above)")

// errNotInStatus is returned after the statuses are printed when the inputs
// hold problems no status can say (check's parent, pods, expired and
// conflict lines); they go to stderr.
var errNotInStatus = errors.New("some problems are not in the statuses (listed above)")

func newStatusCommand(a *app) *cobra.Command {
	return newOfflineCommand(a, "status -f PATH...",
		"Print the statuses and shadow Services the controller would write for a set of manifests",
		"status reads manifests as discovery -f does and prints, as YAML documents, what the\n"+
			"controller would write to a cluster holding them: the status of each GatewayClass and Gateway\n"+
			"of ours, our status.parents entries of each HTTPRoute, GRPCRoute, TLSRoute, TCPRoute and InferencePool, our\n"+
			"status.ancestors entries of each BackendTLSPolicy a route of ours uses, and the shadow\n"+
			"Service of each InferencePool (as the server-side apply configuration). Nothing is\n"+
			"written anywhere. lastTransitionTime is the time of the run.\n\n"+
			"Manifests that would be rejected are listed on stderr (file, document, field) and left out,\n"+
			"with the problems no status can say, as check names them (a parentRef to a Gateway or\n"+
			"ListenerSet not in the inputs, a pool that selects no pod, an expired listener certificate, a\n"+
			"shadow Service name taken); the command then exits with status 1 after printing the rest.\n"+
			"To fail on every problem (False conditions and dropped rules too), use check.",
		func(cmd *cobra.Command, r *offlineResult) error {
			return printStatus(cmd.OutOrStdout(), cmd.ErrOrStderr(), r)
		})
}

// runStatus is status over one path (tests): the offline result printed
// as the command prints it.
func runStatus(ctx context.Context, w, errw io.Writer, dir string, lookupEnv func(string) (string, bool), now time.Time) error {
	r, err := runOffline(ctx, []string{dir}, nil, lookupEnv, now)
	if err != nil {
		return err
	}
	return printStatus(w, errw, r)
}

// printStatus writes r's documents to w as YAML documents: GatewayClasses,
// Gateways, ListenerSets, HTTPRoutes, GRPCRoutes, InferencePools,
// BackendTLSPolicies, then shadow Services, each kind by namespace/name.
// Problems go to errw.
func printStatus(w, errw io.Writer, r *offlineResult) error {
	if err := gateway.WriteStatusDocuments(w, r.docs); err != nil {
		return err
	}
	for _, p := range r.problems {
		fmt.Fprintln(errw, escapeCell("rejected   "+problemLine(p)))
	}
	unseen := 0
	for _, f := range r.findings {
		if !f.inStatus() && !f.note {
			fmt.Fprintln(errw, escapeCell(f.String()))
			unseen++
		}
	}
	switch {
	case len(r.problems) > 0:
		return errManifestProblems
	case unseen > 0:
		return errNotInStatus
	}
	return nil
}
