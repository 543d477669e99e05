// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"context"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/status"
)

// StatusDocument is what the controller would write for one object, as a
// YAML document: the object's identity and its status (for a shadow
// Service, the server-side apply configuration is the document instead).
type StatusDocument struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Status     any               `json:"status,omitempty"`
	Spec       any               `json:"spec,omitempty"`
}

// StatusDocuments waits, bounded by ctx, until every status output of out
// has synced and returns what the writers would write, in this order:
// GatewayClasses, Gateways, ListenerSets, HTTPRoutes, GRPCRoutes,
// TLSRoutes, TCPRoutes, InferencePools, BackendTLSPolicies (our
// status.ancestors entries), then
// the shadow Services as apply configurations; each kind sorted by
// namespace/name. Conditions that the writers would stamp get now as
// lastTransitionTime. status -f prints these (pilot-discovery), and the
// package's golden test (TestGolden) compares them with testdata.
func StatusDocuments(ctx context.Context, out Outputs, now metav1.Time) ([]any, error) {
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
	add(out.TLSRouteStatuses, out.TLSRouteStatuses != nil)
	add(out.TCPRouteStatuses, out.TCPRouteStatuses != nil)
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
			docs = append(docs, StatusDocument{APIVersion: gwGroup, Kind: "GatewayClass", Metadata: meta("", cs.Name),
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
			docs = append(docs, StatusDocument{APIVersion: gwGroup, Kind: "Gateway", Metadata: meta(gs.Namespace, gs.Name), Status: st})
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
			docs = append(docs, StatusDocument{APIVersion: gwGroup, Kind: "ListenerSet", Metadata: meta(ls.Namespace, ls.Name), Status: st})
		}
	}
	routes := func(kind string, c krt.Collection[RouteStatus]) {
		if c == nil {
			return
		}
		for _, rs := range c.List() {
			parents := make([]gwv1.RouteParentStatus, len(rs.Parents))
			for i, p := range rs.Parents {
				p.Conditions = status.StampTransitionTimes(p.Conditions, now)
				parents[i] = p
			}
			docs = append(docs, StatusDocument{APIVersion: gwGroup, Kind: kind, Metadata: meta(rs.Namespace, rs.Name),
				Status: gwv1.RouteStatus{Parents: parents}})
		}
	}
	routes(HTTPRouteKind, out.HTTPRouteStatuses)
	routes(GRPCRouteKind, out.GRPCRouteStatuses)
	routes(TLSRouteKind, out.TLSRouteStatuses)
	routes(TCPRouteKind, out.TCPRouteStatuses)
	if out.PoolStatuses != nil {
		for _, ps := range out.PoolStatuses.List() {
			parents := make([]inferencev1.ParentStatus, len(ps.Parents))
			for i, p := range ps.Parents {
				p.Conditions = status.StampTransitionTimes(p.Conditions, now)
				parents[i] = p
			}
			docs = append(docs, StatusDocument{APIVersion: inferencev1.GroupVersion.String(), Kind: "InferencePool",
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
			docs = append(docs, StatusDocument{APIVersion: gwGroup, Kind: "BackendTLSPolicy", Metadata: meta(ps.Namespace, ps.Name),
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

// WriteStatusDocuments writes docs to w as YAML documents, each after a
// "---" line: the form status -f prints.
func WriteStatusDocuments(w io.Writer, docs []any) error {
	for _, d := range docs {
		out, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", out); err != nil {
			return err
		}
	}
	return nil
}
