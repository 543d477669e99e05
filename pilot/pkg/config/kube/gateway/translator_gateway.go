// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// TranslatorGateway builds the xDS translator's view of gw (model.Gateway)
// from the routes that name it: each served listener (ListenerView.Served;
// an HTTPS one with its Secret), the Gateway's own and then those of its
// accepted ListenerSets in precedence order (named ListenerSetListenerName),
// with the routes attached to it, sorted by kind, namespace and name.
func TranslatorGateway(gw GatewayView, routes []RouteResult) *model.Gateway {
	models := make([]routeModel, len(routes))
	for i := range routes {
		models[i] = newRouteModel(&routes[i])
	}
	return translatorGateway(gw, models)
}

// translatorGateway is TranslatorGateway over the routes' models
// (routeModel), which it may reorder.
func translatorGateway(gw GatewayView, routes []routeModel) *model.Gateway {
	// Fetch gives them in key order ("kind/namespace/name"), which is not
	// the model's (model.CompareRoutes) when one namespace is another's
	// prefix followed by a character below '/', such as "team-a" and
	// "team"; the core Translator, finding the routes out of order,
	// would translate the Gateway from scratch on every change.
	byModelOrder := func(a, b routeModel) int { return model.CompareRoutes(a.Route, b.Route) }
	if !slices.IsSortedFunc(routes, byModelOrder) {
		slices.SortFunc(routes, byModelOrder)
	}
	out := &model.Gateway{Namespace: gw.Gateway.Namespace, Name: gw.Gateway.Name,
		EPPBodyMode: gw.EPPBodyMode, ClassParametersError: gw.ClassProblem}
	if gw.BackendClientCert.Name != "" {
		out.BackendClientCertificate = gw.BackendClientCert.String()
	}
	if out.ClassParametersError == "" && gw.ParametersProblem != "" {
		out.ClassParametersError = gw.ParametersProblem
	}
	if out.ClassParametersError == "" && gw.AddressProblem != "" {
		out.ClassParametersError = gw.AddressProblem
	}
	listeners := slices.Clone(gw.Listeners)
	for _, ls := range gw.ListenerSets {
		if ls.Accepted() {
			listeners = append(listeners, ls.Listeners...)
		}
	}
	for _, l := range listeners {
		if !l.Served() {
			continue
		}
		name := string(l.Name)
		if l.Set.Name != "" {
			name = ListenerSetListenerName(l.Set, l.Name)
		}
		ml := model.Listener{Name: name, Port: uint32(l.Port), Protocol: l.Protocol, Hostname: l.Hostname,
			Filters: l.Filters, FilterError: l.FilterError}
		if l.Certificate.Name != "" {
			ml.TLS = &model.ListenerTLS{CertificateRefs: []string{l.Certificate.String()}, ClientValidation: l.ClientValidation}
		}
		for i := range routes {
			if attachedTo(routes[i].Parents, gw.Gateway, l.Set, l.Name) {
				ml.Routes = append(ml.Routes, routes[i].Route)
			}
		}
		out.Listeners = append(out.Listeners, ml)
	}
	return out
}

func attachedTo(parents []ParentResult, gw, set types.NamespacedName, listener gwv1.SectionName) bool {
	for _, p := range parents {
		if p.Accepted && p.Gateway == gw && p.ListenerSet == set && slices.Contains(p.Listeners, listener) {
			return true
		}
	}
	return false
}

func modelRoute(r *RouteResult) *model.Route {
	mr := &model.Route{Kind: r.Route.Kind, Namespace: r.Route.Namespace, Name: r.Route.Name, CreationTimestamp: r.Created}
	for _, h := range r.Route.Hostnames {
		mr.Hostnames = append(mr.Hostnames, string(h))
	}
	for i, rule := range r.Rules {
		if rule.Problem != "" {
			continue // left out; RouteParentStatuses says why
		}
		rr := model.Rule{Index: i, HTTP: rule.HTTP, GRPC: rule.GRPC, TLS: rule.TLS, TCP: rule.TCP, ExternalAuth: rule.ExternalAuth}
		for _, m := range rule.Mirrors {
			if m.Service == nil {
				continue
			}
			if rr.Mirrors == nil {
				rr.Mirrors = map[string]*model.ServiceBackend{}
			}
			rr.Mirrors[core.ClusterName(uint32(m.Service.Port), m.Service.Host)] = m.Service
		}
		for j, b := range rule.Backends {
			mb := model.Backend{Weight: b.Weight, Service: b.Service, Pool: b.Pool}
			if !b.ResolvedRefs {
				mb.Invalid = b.Message
			}
			if j < len(rule.HTTPFilters) {
				mb.HTTPFilters = rule.HTTPFilters[j]
			}
			if j < len(rule.GRPCFilters) {
				mb.GRPCFilters = rule.GRPCFilters[j]
			}
			rr.Backends = append(rr.Backends, mb)
		}
		mr.Rules = append(mr.Rules, rr)
	}
	return mr
}
