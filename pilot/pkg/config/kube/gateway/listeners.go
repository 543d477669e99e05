// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// Route kinds we attach (Gateway API RouteGroupKind, group GatewayGroup).
const (
	HTTPRouteKind = "HTTPRoute"
	GRPCRouteKind = "GRPCRoute"
	TLSRouteKind  = "TLSRoute"
	TCPRouteKind  = "TCPRoute"
)

// protocolKinds are the route kinds each listener protocol takes, its
// supportedKinds when allowedRoutes.kinds is empty: HTTP and HTTPS take
// HTTPRoutes and GRPCRoutes, TLS (Passthrough or Terminate) TLSRoutes, TCP
// TCPRoutes.
var protocolKinds = map[gwv1.ProtocolType][]string{
	gwv1.HTTPProtocolType:  {HTTPRouteKind, GRPCRouteKind},
	gwv1.HTTPSProtocolType: {HTTPRouteKind, GRPCRouteKind},
	gwv1.TLSProtocolType:   {TLSRouteKind},
	gwv1.TCPProtocolType:   {TCPRouteKind},
}

// NamespaceLabels returns the labels of the namespace called name, or nil
// when the namespace is unknown. It feeds allowedRoutes.namespaces.selector.
type NamespaceLabels func(name string) map[string]string

// GatewayView is our view of one Gateway of our class: its listeners as we
// validated them. Attachment (AttachRoute) and Gateway status (GatewayStatus)
// are computed from it.
type GatewayView struct {
	Gateway    types.NamespacedName
	Generation int64
	Listeners  []ListenerView
	// Class is spec.gatewayClassName; EPPBodyMode and ClassProblem are
	// its parameters (ClassParams): a Gateway of a class whose parameters
	// do not resolve is Accepted=False/InvalidParameters and refused by
	// the translator.
	Class        string
	EPPBodyMode  model.EPPBodyMode
	ClassProblem string
	// ParametersProblem is set when spec.infrastructure.parametersRef
	// names anything: no Gateway-level parameters are implemented, so the
	// Gateway is Accepted=False/InvalidParameters and refused by the
	// translator, as for a class whose parameters do not resolve.
	ParametersProblem string
	// InsecureFrontend is set when spec.tls.frontend uses the
	// AllowInsecureFallback mode anywhere: the Gateway's status carries
	// InsecureFrontendValidationMode=True/ConfigurationChanged.
	InsecureFrontend bool
	// AddressProblem is why spec.addresses cannot be used (addresses.go):
	// the Gateway is Accepted=False/UnsupportedAddress, gets no deployment
	// and is refused by the translator.
	AddressProblem string
	// BackendClientCert is the Secret of spec.tls.backend.clientCertificateRef
	// once it resolves: the certificate the Gateway presents to backends
	// it reaches over TLS (a BackendTLSPolicy's). BackendClientCertSet says
	// the reference is set; BackendClientCertReason and ...Message say why it
	// does not resolve (the Gateway's ResolvedRefs=False; the Gateway stays
	// Accepted and reaches its TLS backends without a client certificate).
	BackendClientCert        types.NamespacedName
	BackendClientCertSet     bool
	BackendClientCertReason  gwv1.GatewayConditionReason
	BackendClientCertMessage string
	// ListenerSets are the ListenerSets whose parentRef names this Gateway,
	// in listener precedence order (AddListenerSets), admitted or not. The
	// listeners of the accepted ones are served with the Gateway's own
	// (Listeners, which holds only those) and take routes whose parentRef
	// names their ListenerSet.
	ListenerSets []ListenerSetView
}

// ListenerView is one Gateway API Listener as we validated it.
type ListenerView struct {
	Name     gwv1.SectionName
	Port     gwv1.PortNumber
	Protocol gwv1.ProtocolType
	// Hostname is spec.listeners[].hostname, "" for any.
	Hostname string
	// Accepted, with Reason and Message of Accepted=False: the protocol is
	// HTTP, HTTPS terminating TLS with one certificateRef (tls.mode
	// Terminate), TLS passing it through (tls.mode Passthrough) or
	// terminating it with one certificateRef, or TCP; and
	// allowedRoutes.namespaces is usable.
	Accepted bool
	Reason   gwv1.ListenerConditionReason
	Message  string
	// ResolvedRefs, with RefsReason and RefsMessage of ResolvedRefs=False
	// (InvalidRouteKinds, InvalidCertificateRef).
	ResolvedRefs bool
	RefsReason   gwv1.ListenerConditionReason
	RefsMessage  string
	// Certificate is, for an HTTPS listener or a TLS listener that
	// terminates TLS, the Secret of its certificateRef once it resolves
	// (ResolveCertificateRef); zero while it does not, and then the
	// listener is not served (Served).
	Certificate types.NamespacedName
	// Passthrough is set for a TLS listener with tls.mode Passthrough: the
	// client's TLS goes to the backend untouched, no certificate.
	Passthrough bool
	// ClientValidation is, for an HTTPS listener, the client-certificate
	// validation the Gateway's spec.tls.frontend asks on its port, with the
	// CA certificates that resolved; nil when none is asked. A listener
	// asked for validation none of whose CAs resolves is not accepted
	// (NoValidCACertificate).
	ClientValidation *model.ClientValidation
	// Kinds is status.listeners[].supportedKinds: allowedRoutes.kinds that
	// we support for the listener's protocol, or all of those
	// (protocolKinds) when none are listed.
	Kinds []gwv1.RouteGroupKind
	// From and Selector are allowedRoutes.namespaces (default Same).
	From     gwv1.FromNamespaces
	Selector labels.Selector
	// Namespace is the Gateway's namespace (the ListenerSet's for a
	// listener of a ListenerSet), for From Same.
	Namespace string
	// Set is the ListenerSet the listener comes from; zero for the
	// Gateway's own listeners.
	Set types.NamespacedName
	// Conflicted, with ConflictReason (ProtocolConflict, HostnameConflict)
	// and ConflictMessage: another listener uses the same port with another
	// protocol, or the same port, protocol and hostname. No route attaches
	// to a conflicted listener and it is not programmed.
	Conflicted      bool
	ConflictReason  gwv1.ListenerConditionReason
	ConflictMessage string
	// Filters are filters.requests resolved (resolveListenerFilters), in
	// their order; FilterError, when set, is why one does not resolve
	// (ResolvedRefs=False/InvalidListenerFilterRef): the listener is
	// served, and answers every request 500.
	Filters     []model.ListenerFilter
	FilterError string
}

// Usable reports whether routes may attach to the listener: it is accepted
// and not conflicted.
func (l *ListenerView) Usable() bool { return l.Accepted && !l.Conflicted }

// Served reports whether the listener reaches the proxies: it is usable
// and, when it terminates TLS (HTTPS, TLS Terminate), its certificateRef
// resolved. Routes attach to a usable listener whose certificate does not
// resolve (its attachedRoutes count them), but it is not programmed.
func (l *ListenerView) Served() bool {
	return l.Usable() && (!l.terminatesTLS() || l.Certificate.Name != "")
}

// terminatesTLS reports whether the listener terminates TLS with a
// certificate of its own: HTTPS, or TLS in mode Terminate.
func (l *ListenerView) terminatesTLS() bool {
	return l.Protocol == gwv1.HTTPSProtocolType || (l.Protocol == gwv1.TLSProtocolType && !l.Passthrough)
}

// NewGatewayView validates the listeners of gw, a Gateway whose class is
// ours, resolving HTTPS listeners' certificateRefs against certs.
func NewGatewayView(gw *gwv1.Gateway, certs CertificateLookups) *GatewayView {
	v := &GatewayView{Gateway: types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}, Generation: gw.Generation}
	for _, l := range gw.Spec.Listeners {
		v.Listeners = append(v.Listeners, newListenerView(gw, gw.Namespace, l, certs))
	}
	v.InsecureFrontend = InsecureFrontendValidation(gw)
	if gw.Spec.TLS != nil && gw.Spec.TLS.Backend != nil && gw.Spec.TLS.Backend.ClientCertificateRef != nil {
		v.BackendClientCertSet = true
		key, problem := ResolveCertificateRef(gw.Namespace, *gw.Spec.TLS.Backend.ClientCertificateRef, certs)
		switch {
		case problem == nil:
			v.BackendClientCert = key
		case problem.reason == gwv1.ListenerReasonRefNotPermitted:
			v.BackendClientCertReason, v.BackendClientCertMessage = gwv1.GatewayReasonRefNotPermitted, "spec.tls.backend.clientCertificateRef: "+problem.message
		default:
			v.BackendClientCertReason, v.BackendClientCertMessage = gwv1.GatewayReasonInvalidClientCertificateRef, "spec.tls.backend.clientCertificateRef: "+problem.message
		}
	}
	markConflicts(v.Listeners)
	return v
}

// markConflicts sets Conflicted on listeners sharing a port (Gateway API
// ListenerConditionConflicted): a different protocol on the same port is a
// ProtocolConflict (it wins over a hostname conflict); the same protocol and
// hostname ("" included) on the same port is a HostnameConflict. Both sides of
// a conflict are marked.
func markConflicts(ls []ListenerView) {
	for i := range ls {
		for j := range ls {
			a, b := &ls[i], &ls[j]
			if i == j || a.Port != b.Port {
				continue
			}
			switch {
			case a.Protocol != b.Protocol:
				a.Conflicted, a.ConflictReason = true, gwv1.ListenerReasonProtocolConflict
				a.ConflictMessage = fmt.Sprintf("listener %s uses port %d with protocol %s", b.Name, b.Port, b.Protocol)
			case a.Hostname == b.Hostname && a.ConflictReason != gwv1.ListenerReasonProtocolConflict:
				a.Conflicted, a.ConflictReason = true, gwv1.ListenerReasonHostnameConflict
				a.ConflictMessage = fmt.Sprintf("listener %s uses port %d with the same hostname %q", b.Name, b.Port, b.Hostname)
			}
		}
	}
}

// newListenerView validates listener l of gw, or of one of its ListenerSets
// in namespace ns (certs.FromKind ListenerSetKind): certificateRefs and
// allowedRoutes Same are relative to ns, spec.tls.frontend is the Gateway's.
func newListenerView(gw *gwv1.Gateway, ns string, l gwv1.Listener, certs CertificateLookups) ListenerView {
	gwCerts := certs
	gwCerts.FromKind = ""
	v := ListenerView{
		Name: l.Name, Port: l.Port, Protocol: l.Protocol, Hostname: string(ptr.Deref(l.Hostname, "")),
		Accepted: true, ResolvedRefs: true, From: gwv1.NamespacesFromSame, Namespace: ns,
	}
	reject := func(reason gwv1.ListenerConditionReason, format string, args ...any) {
		if v.Accepted {
			v.Accepted, v.Reason, v.Message = false, reason, fmt.Sprintf(format, args...)
		}
	}
	// terminate resolves the certificate of a listener that terminates
	// TLS (HTTPS, or TLS in mode Terminate; what names it in messages):
	// exactly one certificateRef. Several certificates on one listener are
	// implementation-specific; one per listener is what the Gateway API's
	// core support asks, and what the proxies are given.
	terminate := func(what string) {
		refs := l.TLS.CertificateRefs
		switch {
		case len(refs) == 0:
			reject(gwv1.ListenerReasonUnsupportedValue, "%s needs tls.certificateRefs", what)
			v.ResolvedRefs, v.RefsReason, v.RefsMessage = false, gwv1.ListenerReasonInvalidCertificateRef, "tls.certificateRefs is empty"
		case len(refs) > 1:
			reject(gwv1.ListenerReasonUnsupportedValue, "tls.certificateRefs has %d entries: infermesh supports one certificate per listener", len(refs))
		default:
			key, problem := ResolveCertificateRef(ns, refs[0], certs)
			if problem != nil {
				v.ResolvedRefs, v.RefsReason, v.RefsMessage = false, problem.reason, problem.message
			} else {
				v.Certificate = key
			}
		}
	}
	switch l.Protocol {
	case gwv1.HTTPProtocolType:
	case gwv1.HTTPSProtocolType:
		switch {
		case l.TLS == nil:
			reject(gwv1.ListenerReasonUnsupportedValue, "an HTTPS listener needs tls (mode Terminate and one certificateRef)")
		case ptr.Deref(l.TLS.Mode, gwv1.TLSModeTerminate) != gwv1.TLSModeTerminate:
			reject(gwv1.ListenerReasonUnsupportedValue, "an HTTPS listener terminates TLS (tls.mode Terminate); "+
				"TLS passthrough is protocol TLS with TLSRoutes")
		default:
			terminate("an HTTPS listener")
		}
		if fv := frontendValidationFor(gw, l.Port); fv != nil && v.Accepted {
			if len(fv.CACertificateRefs) == 0 {
				// The CRD requires one; a file-mode Gateway may not.
				reject(gwv1.ListenerReasonNoValidCACertificate, "spec.tls.frontend validation for port %d has no caCertificateRefs", l.Port)
				break
			}
			cv, problem := resolveFrontendValidation(gw.Namespace, fv, gwCerts)
			if problem != nil && v.ResolvedRefs {
				v.ResolvedRefs, v.RefsReason, v.RefsMessage = false, problem.reason, problem.message
			}
			if cv == nil {
				reject(gwv1.ListenerReasonNoValidCACertificate, "none of the caCertificateRefs of spec.tls.frontend for port %d resolves (see ResolvedRefs)", l.Port)
			}
			v.ClientValidation = cv
		}
	case gwv1.TLSProtocolType:
		switch {
		case l.TLS == nil:
			reject(gwv1.ListenerReasonUnsupportedValue, "a TLS listener needs tls (mode Passthrough, or Terminate and one certificateRef)")
		case ptr.Deref(l.TLS.Mode, gwv1.TLSModeTerminate) == gwv1.TLSModePassthrough:
			// certificateRefs are ignored in this mode (ListenerTLSConfig).
			v.Passthrough = true
		default:
			terminate("a TLS listener in mode Terminate")
		}
	case gwv1.TCPProtocolType:
		if l.TLS != nil {
			// The CRD forbids it; a file-mode Gateway may not be validated
			// by it.
			reject(gwv1.ListenerReasonUnsupportedValue, "a TCP listener takes no tls (use protocol TLS)")
		}
	default:
		reject(gwv1.ListenerReasonUnsupportedProtocol, "protocol %q is not supported: only HTTP, HTTPS, TLS and TCP", l.Protocol)
		return v // no supported kinds
	}
	v.Kinds, v.ResolvedRefs, v.RefsReason, v.RefsMessage = listenerKinds(l, v)
	if ar := l.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		v.From = ptr.Deref(ar.Namespaces.From, gwv1.NamespacesFromSame)
		switch v.From {
		case gwv1.NamespacesFromSame, gwv1.NamespacesFromAll:
		case gwv1.NamespacesFromSelector:
			if ar.Namespaces.Selector == nil {
				reject(gwv1.ListenerReasonUnsupportedValue, "allowedRoutes.namespaces.from is Selector but selector is not set")
				break
			}
			sel, err := metav1.LabelSelectorAsSelector(ar.Namespaces.Selector)
			if err != nil {
				reject(gwv1.ListenerReasonUnsupportedValue, "allowedRoutes.namespaces.selector: %v", err)
				break
			}
			v.Selector = sel
		default:
			reject(gwv1.ListenerReasonUnsupportedValue, "allowedRoutes.namespaces.from %q is not supported", v.From)
		}
	}
	resolveListenerFilters(&v, listenerFilterSpecs(l.Filters), certs.Filters)
	return v
}

// listenerKinds returns supportedKinds and the ResolvedRefs outcome: with no
// allowedRoutes.kinds, the kinds of the listener's protocol
// (protocolKinds); else the listed kinds among those, and ResolvedRefs
// False with InvalidRouteKinds if any listed kind is not one of them (a
// TCPRoute on a TLS listener, a TLSRoute on an HTTP one, an unknown kind).
// A certificate problem found earlier wins.
func listenerKinds(l gwv1.Listener, v ListenerView) ([]gwv1.RouteGroupKind, bool, gwv1.ListenerConditionReason, string) {
	ok, reason, msg := v.ResolvedRefs, v.RefsReason, v.RefsMessage
	supported := protocolKinds[l.Protocol]
	if l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		kinds := make([]gwv1.RouteGroupKind, len(supported))
		for i, k := range supported {
			kinds[i] = routeGroupKind(k)
		}
		return kinds, ok, reason, msg
	}
	var kinds []gwv1.RouteGroupKind
	for _, k := range l.AllowedRoutes.Kinds {
		g := string(ptr.Deref(k.Group, GatewayGroup))
		if g == GatewayGroup && slices.Contains(supported, string(k.Kind)) {
			if !slices.ContainsFunc(kinds, func(x gwv1.RouteGroupKind) bool { return x.Kind == k.Kind }) {
				kinds = append(kinds, routeGroupKind(string(k.Kind)))
			}
			continue
		}
		if ok {
			ok, reason, msg = false, gwv1.ListenerReasonInvalidRouteKinds,
				fmt.Sprintf("route kind %s/%s is not supported on a %s listener: only %s", g, k.Kind, l.Protocol, strings.Join(supported, " and "))
		}
	}
	return kinds, ok, reason, msg
}

func routeGroupKind(kind string) gwv1.RouteGroupKind {
	return gwv1.RouteGroupKind{Group: ptr.To(gwv1.Group(GatewayGroup)), Kind: gwv1.Kind(kind)}
}

// AllowsKind reports whether the listener admits routes of kind (group
// GatewayGroup): the kind is among its supportedKinds.
func (l *ListenerView) AllowsKind(kind string) bool {
	return slices.ContainsFunc(l.Kinds, func(k gwv1.RouteGroupKind) bool { return string(k.Kind) == kind })
}

// AllowsNamespace reports whether allowedRoutes.namespaces admits a route in
// namespace ns: From All admits every namespace, Same only the Gateway's,
// Selector those whose labels (from nsLabels) the selector matches. An
// unknown namespace matches no selector.
func (l *ListenerView) AllowsNamespace(ns string, nsLabels NamespaceLabels) bool {
	switch l.From {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return ns == l.Namespace
	case gwv1.NamespacesFromSelector:
		if l.Selector == nil || nsLabels == nil {
			return false
		}
		lbls := nsLabels(ns)
		return lbls != nil && l.Selector.Matches(labels.Set(lbls))
	}
	return false
}
