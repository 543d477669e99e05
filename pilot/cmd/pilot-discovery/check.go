// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// errCheckFailed is check's error when it found problems (listed on stdout).
var errCheckFailed = errors.New("check found problems (listed above)")

func newCheckCommand(a *app) *cobra.Command {
	cmd := newOfflineCommand(a, "check -f PATH...",
		"Check manifests as the controller would: print every problem and exit 1 when there is one",
		"check reads manifests as status -f does and prints every problem, one per line, for a CI pipeline\n"+
			"to gate a merge on:\n"+
			"  rejected   a manifest the API server would reject: file:line, document, object, field, message\n"+
			"  condition  a condition that says something is wrong (Accepted, ResolvedRefs, ... False;\n"+
			"             PartiallyInvalid, Conflicted or TakesHostnames True), with the object, its parent,\n"+
			"             reason and message. A hostname a more specific listener of another namespace takes\n"+
			"             from a route shows on both: the route's Conflicted, the listener's TakesHostnames\n"+
			"  dropped    a route rule left out of the configuration, with the route and why\n"+
			"  conflict   an InferencePool's shadow Service name taken by a Service we do not own\n"+
			"  parent     a route's parentRef, or a ListenerSet's spec.parentRef, to a Gateway or ListenerSet\n"+
			"             that is not in the inputs (the route is attached nowhere through it)\n"+
			"  pods       an InferencePool whose selector matches no Pod and no workload's pod template\n"+
			"  expired    an HTTPS listener whose certificate is expired (or not yet valid) now\n"+
			"Lines starting with note are not problems: a parentRef to a Gateway of another class (its own\n"+
			"controller judges it), a pool only workloads select in a folder of Pods (file mode serves it none).\n"+
			"  invalid    a BackendTLSPolicy no route uses yet whose TLS cannot be honoured (a route\n"+
			"             sending to its Services would get 500), with the field and why\n"+
			"Gateways are never deployed offline, so Programmed=False/Pending is not a problem here.\n"+
			"It exits 0 when there is none, 1 when there is one or the manifests cannot be read.",
		func(cmd *cobra.Command, r *offlineResult) error {
			return printCheck(cmd.OutOrStdout(), r)
		})
	cmd.Example = "  ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true pilot-discovery check -f examples/seed\n" +
		"  kustomize build overlays/prod | pilot-discovery check -f -"
	return cmd
}

// printCheck writes r's problems, one per line, and a summary; it returns
// errCheckFailed when there is any.
func printCheck(w io.Writer, r *offlineResult) error {
	n := 0
	for _, p := range r.problems {
		fmt.Fprintln(w, escapeCell("rejected   "+problemLine(p)))
		n++
	}
	for _, f := range r.findings {
		if !f.note {
			fmt.Fprintln(w, escapeCell(f.String()))
			n++
		}
	}
	for _, f := range r.findings {
		if f.note {
			fmt.Fprintln(w, escapeCell(f.String()))
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "no problems found")
		return nil
	}
	fmt.Fprintf(w, "%d problem(s) found\n", n)
	return errCheckFailed
}

// problemLine is p as file:line: document N (Kind ns/name): field: message.
func problemLine(p file.Problem) string {
	if p.Line > 0 {
		p.File = fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return p.Error()
}

// finding is one problem in what the controller computed (condition,
// dropped, conflict) or in the inputs that no status says (parent, pods,
// expired: inputFindings), or a note.
type finding struct {
	// what is condition, dropped, conflict, parent, pods, expired or note.
	what string
	// note: informational, not a problem (not counted).
	note bool
	// object is "Kind namespace/name"; parent, when set, the status entry's
	// parent ("Gateway ns/name").
	object, parent string
	text           string
}

func (f finding) String() string {
	s := fmt.Sprintf("%-10s %s", f.what, f.object)
	if f.parent != "" {
		s += " (parent " + f.parent + ")"
	}
	return s + ": " + f.text
}

// negativePolarity are the condition types whose True means a problem
// (Conflicted also on a route's parent entry: a hostname taken from it).
var negativePolarity = map[string]bool{
	string(gwv1.RouteConditionPartiallyInvalid):        true,
	string(gwv1.ListenerConditionConflicted):           true,
	string(gwv1.ListenerConditionOverlappingTLSConfig): true,
	gateway.TakesHostnamesCondition:                    true,
}

// conditionProblem reports whether c says something is wrong. Programmed
// False with reason Pending is not: offline, nothing is deployed.
func conditionProblem(c metav1.Condition) bool {
	if c.Type == string(gwv1.GatewayConditionProgrammed) && c.Reason == string(gwv1.GatewayReasonPending) {
		return false
	}
	if negativePolarity[c.Type] {
		return c.Status == metav1.ConditionTrue
	}
	return c.Status == metav1.ConditionFalse
}

// conditionFindings are the problem conditions of one object's entry.
func conditionFindings(object, parent string, conds []metav1.Condition) []finding {
	var out []finding
	for _, c := range conds {
		if !conditionProblem(c) {
			continue
		}
		what := "condition"
		if c.Type == string(gwv1.RouteConditionPartiallyInvalid) {
			what = "dropped"
		}
		out = append(out, finding{what: what, object: object, parent: parent,
			text: fmt.Sprintf("%s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)})
	}
	return out
}

func parentName(kind, ns, name string) string { return kind + " " + ns + "/" + name }

// findingsOf walks the controller's outputs (synced) for problems, in a
// stable order (sortFindings): classes, Gateways, ListenerSets, HTTPRoutes,
// GRPCRoutes, pools, BackendTLSPolicies (backendTLSPolicyFindings), with
// shadow Service conflicts against services (the folder's Services).
func findingsOf(out gateway.Outputs, services krt.Collection[*corev1.Service]) []finding {
	var fs []finding
	if out.ClassStatuses != nil {
		for _, cs := range out.ClassStatuses.List() {
			fs = append(fs, conditionFindings("GatewayClass "+cs.Name, "", []metav1.Condition{cs.Condition})...)
		}
	}
	if out.GatewayStatuses != nil {
		for _, gs := range out.GatewayStatuses.List() {
			obj := parentName("Gateway", gs.Namespace, gs.Name)
			fs = append(fs, conditionFindings(obj, "", gs.Status.Conditions)...)
			for _, l := range gs.Status.Listeners {
				fs = append(fs, conditionFindings(obj+" listener "+string(l.Name), "", l.Conditions)...)
			}
		}
	}
	if out.ListenerSetStatuses != nil {
		for _, ls := range out.ListenerSetStatuses.List() {
			obj := parentName("ListenerSet", ls.Namespace, ls.Name)
			fs = append(fs, conditionFindings(obj, "", ls.Status.Conditions)...)
			for _, l := range ls.Status.Listeners {
				fs = append(fs, conditionFindings(obj+" listener "+string(l.Name), "", l.Conditions)...)
			}
		}
	}
	routes := func(kind string, c krt.Collection[gateway.RouteStatus]) {
		if c == nil {
			return
		}
		for _, rs := range c.List() {
			for _, p := range rs.Parents {
				ns := rs.Namespace
				if p.ParentRef.Namespace != nil {
					ns = string(*p.ParentRef.Namespace)
				}
				parent := parentName(kindOr(p.ParentRef.Kind, "Gateway"), ns, string(p.ParentRef.Name))
				fs = append(fs, conditionFindings(parentName(kind, rs.Namespace, rs.Name), parent, p.Conditions)...)
			}
		}
	}
	routes("HTTPRoute", out.HTTPRouteStatuses)
	routes("GRPCRoute", out.GRPCRouteStatuses)
	routes("TLSRoute", out.TLSRouteStatuses)
	routes("TCPRoute", out.TCPRouteStatuses)
	if out.PoolStatuses != nil {
		for _, ps := range out.PoolStatuses.List() {
			for _, p := range ps.Parents {
				parent := parentName(string(p.ParentRef.Kind), string(p.ParentRef.Namespace), string(p.ParentRef.Name))
				fs = append(fs, conditionFindings(parentName("InferencePool", ps.Namespace, ps.Name), parent, p.Conditions)...)
			}
		}
	}
	fs = append(fs, backendTLSPolicyFindings(out)...)
	if out.ShadowServices != nil && services != nil {
		for _, s := range out.ShadowServices.List() {
			live := services.GetKey(s.ResourceName())
			if live == nil {
				continue
			}
			if _, ours := (*live).Labels[gateway.InferencePoolNameLabel]; ours {
				continue
			}
			pool := s.Apply.Labels[gateway.InferencePoolNameLabel]
			fs = append(fs, finding{what: "conflict", object: parentName("InferencePool", s.Namespace, pool),
				text: fmt.Sprintf("its shadow Service name is taken: Service %s exists without the %s label, so it is not "+
					"ours; in a cluster it is left alone and the pool gets no shadow Service (rename that Service)",
					s.ResourceName(), gateway.InferencePoolNameLabel)})
		}
	}
	sortFindings(fs)
	return fs
}

// inStatus reports whether the statuses status -f prints say f (a False
// condition, a dropped rule); the others it lists on stderr.
func (f finding) inStatus() bool { return f.what == "condition" || f.what == "dropped" }

func kindOr(k *gwv1.Kind, def string) string {
	if k == nil || *k == "" {
		return def
	}
	return string(*k)
}

// kindRank orders findings by kind only (within a kind, the collections'
// own order, by key, is kept).
func kindRank(object string) int {
	for i, k := range []string{"GatewayClass ", "Gateway ", "ListenerSet ", "HTTPRoute ", "GRPCRoute ", "TLSRoute ", "TCPRoute ", "InferencePool ", "BackendTLSPolicy "} {
		if strings.HasPrefix(object, k) {
			return i
		}
	}
	return 99
}

// backendTLSPolicyFindings are the BackendTLSPolicy problems: the False
// conditions of each status.ancestors entry we would write, and, for a
// policy no route of ours uses (no entry), what makes it invalid: a route
// sending to its Services would get 500.
func backendTLSPolicyFindings(out gateway.Outputs) []finding {
	var fs []finding
	used := map[string]bool{}
	if out.BackendTLSPolicyStatuses != nil {
		for _, ps := range out.BackendTLSPolicyStatuses.List() {
			used[ps.ResourceName()] = true
			obj := parentName("BackendTLSPolicy", ps.Namespace, ps.Name)
			for _, a := range ps.Parents {
				fs = append(fs, conditionFindings(obj, parentName(kindOr(a.AncestorRef.Kind, "Gateway"),
					string(ptr.Deref(a.AncestorRef.Namespace, "")), string(a.AncestorRef.Name)), a.Conditions)...)
			}
		}
	}
	if out.BackendTLSPolicies != nil {
		for _, p := range out.BackendTLSPolicies.List() {
			if used[p.ResourceName()] {
				continue
			}
			obj := parentName("BackendTLSPolicy", p.Namespace, p.Name)
			switch {
			case p.Invalid != "":
				fs = append(fs, finding{what: "invalid", object: obj, text: fmt.Sprintf("%s (%s): %s; no route of ours uses it yet, "+
					"and one sending to %s would get 500", "Accepted=False", p.InvalidReason, p.Invalid, strings.Join(p.TargetServices(), ", "))})
			case p.RefsMessage != "":
				fs = append(fs, finding{what: "invalid", object: obj, text: fmt.Sprintf("%s (%s): %s; no route of ours uses it yet",
					"ResolvedRefs=False", p.RefsReason, p.RefsMessage)})
			}
		}
	}
	return fs
}
