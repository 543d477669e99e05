// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/status"
)

// errManifestProblems is returned after the statuses are printed when some
// manifests were left out; the problems themselves go to stderr.
var errManifestProblems = errors.New("some manifests were left out (listed above)")

func newStatusCommand(d deps) *cobra.Command {
	var dir string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status -f DIR",
		Short: "Print the statuses and shadow Services the controller would write for a folder of manifests",
		Long: "status reads the manifests of DIR as discovery -f does and prints, as YAML documents, what the\n" +
			"controller would write to a cluster holding them: the status of each GatewayClass and Gateway\n" +
			"of ours, our status.parents entries of each HTTPRoute, GRPCRoute and InferencePool, and the\n" +
			"shadow Service of each InferencePool (as the server-side apply configuration). Nothing is\n" +
			"written anywhere. lastTransitionTime is the time of the run.\n\n" +
			"Manifests that would be rejected are listed on stderr (file, document, field) and left out;\n" +
			"the command then exits with status 1 after printing the rest.\n\n" + features.Usage(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--file is required: the folder of manifests to read")
			}
			cmd.SilenceUsage = true
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return runStatus(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), dir, d.lookupEnv, time.Now())
		},
	}
	cmd.Flags().StringVarP(&dir, "file", "f", "", "folder of Kubernetes manifests (read with its subfolders)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long computing the statuses may take")
	return cmd
}

// runStatus computes the controller's outputs over dir and writes them to
// w as YAML documents: GatewayClasses, Gateways, HTTPRoutes, GRPCRoutes,
// InferencePools, then shadow Services, each kind by namespace/name.
// Problems go to errw. now stamps lastTransitionTime.
func runStatus(ctx context.Context, w, errw io.Writer, dir string, lookupEnv func(string) (string, bool), now time.Time) error {
	feats, err := features.Load(lookupEnv)
	if err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	// Problems are printed once, below, not also logged.
	src, err := file.New(dir, file.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fmt.Errorf("--file: %w", err)
	}
	stop := make(chan struct{})
	defer close(stop)
	c := gateway.NewOffline(gateway.Inputs{
		GatewayClasses: src.GatewayClasses(), Gateways: src.Gateways(), HTTPRoutes: src.HTTPRoutes(),
		GRPCRoutes: src.GRPCRoutes(), ReferenceGrants: src.ReferenceGrants(), Namespaces: src.Namespaces(),
		Services: src.Services(), InferencePools: src.InferencePools(), ConfigMaps: src.ConfigMaps(), Secrets: src.Secrets(),
	}, feats, []krt.CollectionOption{krt.WithStop(stop)})
	docs, err := statusDocuments(ctx, c.Outputs, metav1.NewTime(now.UTC().Truncate(time.Second)))
	if err != nil {
		return err
	}
	for _, d := range docs {
		out, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", out); err != nil {
			return err
		}
	}
	problems := src.Problems()
	for _, p := range problems {
		fmt.Fprintln(errw, p.Error())
	}
	if len(problems) > 0 {
		return errManifestProblems
	}
	return nil
}

// statusDoc is one printed document: an object's identity and what the
// controller would write.
type statusDoc struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Status     any               `json:"status,omitempty"`
	Spec       any               `json:"spec,omitempty"`
}

// statusDocuments waits (bounded by ctx) until every output collection has
// synced and returns its documents.
func statusDocuments(ctx context.Context, out gateway.Outputs, now metav1.Time) ([]any, error) {
	var syncers []krt.Syncer
	add := func(s krt.Syncer, ok bool) {
		if ok {
			syncers = append(syncers, s)
		}
	}
	add(out.ClassStatuses, out.ClassStatuses != nil)
	add(out.GatewayStatuses, out.GatewayStatuses != nil)
	add(out.HTTPRouteStatuses, out.HTTPRouteStatuses != nil)
	add(out.GRPCRouteStatuses, out.GRPCRouteStatuses != nil)
	add(out.PoolStatuses, out.PoolStatuses != nil)
	add(out.ShadowServices, out.ShadowServices != nil)
	for _, s := range syncers {
		if !s.WaitUntilSynced(ctx.Done()) {
			return nil, fmt.Errorf("computing statuses: %w", context.Cause(ctx))
		}
	}
	gwGroup := gwv1.GroupVersion.String()
	meta := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	var docs []any
	if out.ClassStatuses != nil {
		for _, cs := range out.ClassStatuses.List() {
			docs = append(docs, statusDoc{APIVersion: gwGroup, Kind: "GatewayClass", Metadata: meta("", cs.Name),
				Status: gwv1.GatewayClassStatus{Conditions: status.StampTransitionTimes([]metav1.Condition{cs.Condition}, now)}})
		}
	}
	if out.GatewayStatuses != nil {
		for _, gs := range out.GatewayStatuses.List() {
			st := *gs.Status.DeepCopy()
			st.Conditions = status.StampTransitionTimes(st.Conditions, now)
			for i := range st.Listeners {
				st.Listeners[i].Conditions = status.StampTransitionTimes(st.Listeners[i].Conditions, now)
			}
			docs = append(docs, statusDoc{APIVersion: gwGroup, Kind: "Gateway", Metadata: meta(gs.Namespace, gs.Name), Status: st})
		}
	}
	routes := func(kind string, c krt.Collection[gateway.RouteStatus]) {
		if c == nil {
			return
		}
		for _, rs := range c.List() {
			parents := make([]gwv1.RouteParentStatus, len(rs.Parents))
			for i, p := range rs.Parents {
				p.Conditions = status.StampTransitionTimes(p.Conditions, now)
				parents[i] = p
			}
			docs = append(docs, statusDoc{APIVersion: gwGroup, Kind: kind, Metadata: meta(rs.Namespace, rs.Name),
				Status: gwv1.RouteStatus{Parents: parents}})
		}
	}
	routes("HTTPRoute", out.HTTPRouteStatuses)
	routes("GRPCRoute", out.GRPCRouteStatuses)
	if out.PoolStatuses != nil {
		for _, ps := range out.PoolStatuses.List() {
			parents := make([]inferencev1.ParentStatus, len(ps.Parents))
			for i, p := range ps.Parents {
				p.Conditions = status.StampTransitionTimes(p.Conditions, now)
				parents[i] = p
			}
			docs = append(docs, statusDoc{APIVersion: inferencev1.GroupVersion.String(), Kind: "InferencePool",
				Metadata: meta(ps.Namespace, ps.Name), Status: inferencev1.InferencePoolStatus{Parents: parents}})
		}
	}
	if out.ShadowServices != nil {
		for _, s := range out.ShadowServices.List() {
			docs = append(docs, s.Apply)
		}
	}
	return docs, nil
}
