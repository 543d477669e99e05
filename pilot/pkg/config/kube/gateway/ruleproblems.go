// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"context"
	"log/slog"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// maxProblemMessage bounds a condition or Event message built from rule
// problems (a condition message may hold 32,768 characters; a regular
// expression alone may hold 1,024, and a route 16 rules).
const maxProblemMessage = 8 << 10

// checkRules runs core.CheckRoute on the route as the translator will get
// it and records each rule's problem in res.Rules[i].Problem: the rules
// the controller reports as dropped are exactly those the translator
// leaves out. When every rule of the route has a problem, the route is not
// accepted by any parent: each accepted attachment becomes Accepted=False
// with reason UnsupportedValue, which also keeps it out of the Gateway's
// attachedRoutes and of the translator's view.
func checkRules(res *RouteResult, opts core.Options) {
	for i := range res.Rules {
		res.Rules[i].Problem = ""
	}
	problems := core.CheckRoute(modelRoute(res), opts)
	for _, p := range problems {
		if p.Rule >= 0 && p.Rule < len(res.Rules) {
			res.Rules[p.Rule].Problem = p.String()
		}
	}
	if len(res.Rules) == 0 || len(problems) < len(res.Rules) {
		return
	}
	msg := truncateMessage("no rule of the route can be served: " + joinProblems(res.Rules))
	for i := range res.Parents {
		if res.Parents[i].Accepted {
			res.Parents[i].Accepted = false
			res.Parents[i].Reason = gwv1.RouteReasonUnsupportedValue
			res.Parents[i].Message = msg
		}
	}
}

// DroppedRulesMessage is the message of a route's PartiallyInvalid
// condition: "Dropped Rule " and each left-out rule's problem, as the
// Gateway API requires of the "drop the rule" approach; "" when no rule is
// left out, or when none is served (the route is then not accepted).
func DroppedRulesMessage(rules []RuleResult) string {
	n := 0
	for _, r := range rules {
		if r.Problem != "" {
			n++
		}
	}
	if n == 0 || n == len(rules) {
		return ""
	}
	return truncateMessage("Dropped Rule(s): " + joinProblems(rules))
}

func joinProblems(rules []RuleResult) string {
	var parts []string
	for _, r := range rules {
		if r.Problem != "" {
			parts = append(parts, r.Problem)
		}
	}
	return strings.Join(parts, "; ")
}

func truncateMessage(s string) string {
	if len(s) <= maxProblemMessage {
		return s
	}
	cut := maxProblemMessage - len(" ... (truncated)")
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + " ... (truncated)"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// routeProblems is what a route's Event says: its dropped rules, or why
// none is served; "" when every rule is served.
func routeProblems(r RouteResult) string {
	for _, p := range r.Parents {
		if p.Reason == gwv1.RouteReasonUnsupportedValue {
			return p.Message
		}
	}
	return DroppedRulesMessage(r.Rules)
}

// routeProblemEvents records a Warning Event (reason UnsupportedValue) on
// a route each time the rules it cannot serve change to a non-empty set,
// while this replica leads: the status says the same, and the Event makes
// it show in `kubectl describe` and in event-based alerting. At the start
// of each leadership term every route with problems gets one Event (the
// API server folds repeats into a count). With no Recorder it records
// nothing.
func routeProblemEvents(cfg ControllerConfig, routes krt.Collection[RouteResult]) (func(context.Context), error) {
	return func(ctx context.Context) {
		if cfg.Recorder == nil {
			<-ctx.Done()
			return
		}
		reg := routes.Register(func(e krt.Event[RouteResult]) {
			if e.New == nil {
				return
			}
			msg := routeProblems(*e.New)
			if msg == "" || (e.Old != nil && routeProblems(*e.Old) == msg) {
				return
			}
			obj := routeObject(cfg, e.New.Route)
			if obj == nil {
				return
			}
			slog.Warn("gateway: route rules cannot be served", "route", e.New.ResourceName(), "problem", msg)
			cfg.Recorder.Eventf(obj, corev1.EventTypeWarning, string(gwv1.RouteReasonUnsupportedValue), "%s", msg)
		})
		<-ctx.Done()
		reg.UnregisterHandler()
	}, nil
}

// routeObject is the route's informer object, copied with its kind set
// (informer objects carry none, and an Event's reference needs it).
func routeObject(cfg ControllerConfig, r Route) runtime.Object {
	key := r.Namespace + "/" + r.Name
	switch r.Kind {
	case HTTPRouteKind:
		if o := cfg.Client.HTTPRoutes().GetKey(key); o != nil {
			c := (*o).DeepCopy()
			c.APIVersion, c.Kind = gwv1.GroupVersion.String(), HTTPRouteKind
			return c
		}
	case GRPCRouteKind:
		if o := cfg.Client.GRPCRoutes().GetKey(key); o != nil {
			c := (*o).DeepCopy()
			c.APIVersion, c.Kind = gwv1.GroupVersion.String(), GRPCRouteKind
			return c
		}
	}
	return nil
}
