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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/status"
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
			"of ours, our status.parents entries of each HTTPRoute, GRPCRoute and InferencePool, our\n"+
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
	for _, d := range r.docs {
		out, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", out); err != nil {
			return err
		}
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
	add(out.ListenerSetStatuses, out.ListenerSetStatuses != nil)
	add(out.PoolStatuses, out.PoolStatuses != nil)
	add(out.BackendTLSPolicies, out.BackendTLSPolicies != nil)
	add(out.BackendTLSPolicyStatuses, out.BackendTLSPolicyStatuses != nil)
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
	if out.ListenerSetStatuses != nil {
		// Programmed stays Pending, as a Gateway's does: nothing is deployed.
		for _, ls := range out.ListenerSetStatuses.List() {
			st := *ls.Status.DeepCopy()
			st.Conditions = status.StampTransitionTimes(st.Conditions, now)
			for i := range st.Listeners {
				st.Listeners[i].Conditions = status.StampTransitionTimes(st.Listeners[i].Conditions, now)
			}
			docs = append(docs, statusDoc{APIVersion: gwGroup, Kind: "ListenerSet", Metadata: meta(ls.Namespace, ls.Name), Status: st})
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
	if out.BackendTLSPolicyStatuses != nil {
		// Our status.ancestors entries: one per Gateway through which a
		// route sends to, mirrors to or calls as an EPP a targeted Service.
		for _, ps := range out.BackendTLSPolicyStatuses.List() {
			ancestors := make([]gwv1.PolicyAncestorStatus, len(ps.Parents))
			for i, a := range ps.Parents {
				a.Conditions = status.StampTransitionTimes(a.Conditions, now)
				ancestors[i] = a
			}
			docs = append(docs, statusDoc{APIVersion: gwGroup, Kind: "BackendTLSPolicy", Metadata: meta(ps.Namespace, ps.Name),
				Status: gwv1.PolicyStatus{Ancestors: ancestors}})
		}
	}
	if out.ShadowServices != nil {
		for _, s := range out.ShadowServices.List() {
			docs = append(docs, s.Apply)
		}
	}
	return docs, nil
}
