// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/infermesh/infermesh/pilot/pkg/bootstrap"
	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// offlineOptions are the flags of the commands that run the controller
// over manifests, with no cluster (status, check).
type offlineOptions struct {
	files   []string
	timeout time.Duration
}

// fileFlagUsage is -f's help, shared by every command that reads manifests.
const fileFlagUsage = "manifests to read: a file, a folder (read with its subfolders) or - for stdin; repeatable"

// newOfflineCommand is the cobra setup status and check share: -f
// (repeatable), --timeout, and a run over the controller's offline result.
func newOfflineCommand(a *app, use, short, long string, run func(cmd *cobra.Command, r *offlineResult) error) *cobra.Command {
	o := &offlineOptions{}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long + "\n\n" + features.Usage(),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.timeout <= 0 {
				return fmt.Errorf("--timeout %s: must be positive", o.timeout)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			r, err := runOffline(ctx, o.files, cmd.InOrStdin(), a.lookupEnv, time.Now())
			if err != nil {
				return withTimeoutHint(err, o.timeout)
			}
			return run(cmd, r)
		},
	}
	cmd.Flags().StringArrayVarP(&o.files, "file", "f", nil, fileFlagUsage+" (required)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 30*time.Second, "how long computing the statuses may take")
	return cmd
}

// offlineResult is what the controller computes over a set of manifests.
type offlineResult struct {
	// docs are the status documents, in gateway.StatusDocuments' order.
	docs []any
	// problems are the manifests left out, each file named as given.
	problems []file.Problem
	// findings are the problems in what the controller computed (False
	// conditions, dropped rules, shadow Service names taken) and in the
	// inputs (inputFindings), and notes.
	findings []finding
}

// runOffline reads paths (stageManifests) and computes the controller's
// outputs over them, as discovery -f does, writing nothing. now stamps
// lastTransitionTime and is the time certificates are checked at. Errors: no or unreadable paths, invalid feature
// flags, or ctx ending before every output has synced.
func runOffline(ctx context.Context, paths []string, stdin io.Reader, lookupEnv func(string) (string, bool), now time.Time) (*offlineResult, error) {
	feats, err := features.Load(lookupEnv)
	if err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	m, err := stageManifests(paths, stdin)
	if err != nil {
		return nil, err
	}
	defer m.cleanup()
	// Problems are returned, and printed once by the command, not logged.
	src, err := file.New(m.dir, fileOptions(slog.New(slog.DiscardHandler), feats))
	if err != nil {
		return nil, fmt.Errorf("-f: %w", err)
	}
	stop := make(chan struct{})
	defer close(stop)
	// The controller discovery -f runs, over the same inputs.
	c := bootstrap.FileController(src, feats, []krt.CollectionOption{krt.WithStop(stop)})
	docs, err := gateway.StatusDocuments(ctx, c.Outputs, metav1.NewTime(now.UTC().Truncate(time.Second)))
	if err != nil {
		return nil, err
	}
	findings := append(findingsOf(c.Outputs, src.Services()),
		inputFindings(inputs{src: src, out: c.Outputs, dir: m.dir, now: now, inference: feats.EnableInferenceExtension})...)
	sortFindings(findings)
	return &offlineResult{docs: docs, problems: m.problems(src), findings: findings}, nil
}
