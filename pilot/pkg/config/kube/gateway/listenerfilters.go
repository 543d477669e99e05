// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
)

// Listener condition reasons of GEP-5224 (pre-routing listener filters)
// that the Gateway API v1.7.0 Go types have no constants for.
const (
	// ListenerReasonInvalidListenerFilter: Accepted=False, a filter is
	// structurally invalid (here: the ExternalProcessor it names is
	// not Accepted).
	ListenerReasonInvalidListenerFilter gwv1.ListenerConditionReason = "InvalidListenerFilter"
	// ListenerReasonInvalidListenerFilterRef: ResolvedRefs=False, a
	// filter's reference names a kind that is not supported, an object
	// that does not exist, or one that does not resolve.
	ListenerReasonInvalidListenerFilterRef gwv1.ListenerConditionReason = "InvalidListenerFilterRef"
	// ListenerReasonInvalidListenerFilterOrder is never set: every filter
	// runs in list order (core, listenerfilter.go).
	ListenerReasonInvalidListenerFilterOrder gwv1.ListenerConditionReason = "InvalidListenerFilterOrder"
)

// DefaultProcessorMessageTimeout is an ExternalProcessor's messageTimeout
// when unset (Envoy's ext_proc default); MaxProcessorMessageTimeout the
// largest accepted.
const (
	DefaultProcessorMessageTimeout = 200 * time.Millisecond
	MaxProcessorMessageTimeout     = time.Hour
)

// ListenerFilterLookups are what resolving a listener's filters reads.
type ListenerFilterLookups struct {
	// ExternalProcessor returns the ExternalProcessor namespace/name, or nil.
	ExternalProcessor func(key types.NamespacedName) *imv1alpha1.ExternalProcessor
	// Backends resolve an ExternalProcessor's Service port and its client
	// TLS.
	Backends BackendLookups
	Options  BackendOptions
}

// ProcessorResult is an ExternalProcessor resolved: Processor when it can
// be served; else Accepted false (the spec is one infermesh cannot serve)
// or ResolvedRefs false (its Service, port or client TLS does not
// resolve), each with Reason and Message. Upstream is the Service whose
// client TLS was looked up (BackendTLSPolicy status).
type ProcessorResult struct {
	Processor    *model.ExternalProcessor
	Accepted     bool
	ResolvedRefs bool
	Reason       string
	Message      string
	Upstream     types.NamespacedName
}

// ResolveExternalProcessor validates ep's spec (what the CRD's schema and
// CEL rules say, checked again for file mode, which has no API server) and
// resolves its Service port: the Service exists in ep's namespace with
// that port, and the port's client TLS (a BackendTLSPolicy's) can be
// honoured, else the processor is never called (fail closed, no plaintext
// fallback). gRPC always runs over HTTP/2, whatever the port declares.
func ResolveExternalProcessor(ep *imv1alpha1.ExternalProcessor, lk BackendLookups, opts BackendOptions) ProcessorResult {
	invalid := func(format string, args ...any) ProcessorResult {
		return ProcessorResult{Reason: imv1alpha1.ReasonInvalid, Message: fmt.Sprintf(format, args...)}
	}
	s := ep.Spec
	if s.BackendRef.Name == "" {
		return invalid("spec.backendRef.name is empty")
	}
	if s.BackendRef.Port < 1 || s.BackendRef.Port > 65535 {
		return invalid("spec.backendRef.port %d is not a port (1-65535)", s.BackendRef.Port)
	}
	p := &model.ExternalProcessor{Namespace: ep.Namespace, Name: ep.Name, RequestHeaders: true, MessageTimeout: DefaultProcessorMessageTimeout}
	if m := s.ProcessingMode; m != nil {
		var err error
		if p.RequestHeaders, err = headerMode("requestHeaders", m.RequestHeaders, true); err != nil {
			return invalid("%v", err)
		}
		if p.ResponseHeaders, err = headerMode("responseHeaders", m.ResponseHeaders, false); err != nil {
			return invalid("%v", err)
		}
		if p.RequestBodyStreamed, err = bodyMode("requestBody", m.RequestBody); err != nil {
			return invalid("%v", err)
		}
		if p.ResponseBodyStreamed, err = bodyMode("responseBody", m.ResponseBody); err != nil {
			return invalid("%v", err)
		}
		if p.RequestBodyStreamed && !p.RequestHeaders {
			return invalid("spec.processingMode: requestBody FullDuplexStreamed needs requestHeaders Send")
		}
		if p.ResponseBodyStreamed && !p.ResponseHeaders {
			return invalid("spec.processingMode: responseBody FullDuplexStreamed needs responseHeaders Send")
		}
	}
	switch s.FailureMode {
	case "", imv1alpha1.FailClose:
	case imv1alpha1.FailOpen:
		p.FailOpen = true
	default:
		return invalid("spec.failureMode %q is not FailOpen or FailClose", s.FailureMode)
	}
	if s.MessageTimeout != nil {
		d, err := time.ParseDuration(string(*s.MessageTimeout))
		if err != nil || d <= 0 || d > MaxProcessorMessageTimeout {
			return invalid("spec.messageTimeout %q is not a duration above 0 and at most 1h", *s.MessageTimeout)
		}
		p.MessageTimeout = d
	}
	res := ProcessorResult{Accepted: true}
	port := gwv1.PortNumber(s.BackendRef.Port)
	rb := ResolveBackendRef(imv1alpha1.ExternalProcessorKind, ep.Namespace,
		gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(s.BackendRef.Name), Port: &port}}, lk, opts)
	res.Upstream = rb.Upstream
	if !rb.ResolvedRefs {
		res.Reason, res.Message = imv1alpha1.ReasonBackendNotFound, "spec.backendRef: "+rb.Message
		if rb.Reason == RouteReasonInvalidBackendTLS {
			res.Reason = imv1alpha1.ReasonInvalidBackendTLS
		}
		return res
	}
	var svc *corev1.Service
	if lk.Service != nil {
		svc = lk.Service(rb.Key)
	}
	if svc == nil || !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Port == s.BackendRef.Port }) {
		res.Reason, res.Message = imv1alpha1.ReasonBackendNotFound, fmt.Sprintf("spec.backendRef: Service %s has no port %d", rb.Key, s.BackendRef.Port)
		return res
	}
	p.Host, p.Port, p.TLS = rb.Service.Host, rb.Service.Port, rb.Service.TLS
	res.ResolvedRefs, res.Reason, res.Message, res.Processor = true, imv1alpha1.ReasonResolvedRefs, "", p
	return res
}

func headerMode(field string, m imv1alpha1.HeaderMode, def bool) (bool, error) {
	switch m {
	case "":
		return def, nil
	case imv1alpha1.HeaderModeSend:
		return true, nil
	case imv1alpha1.HeaderModeSkip:
		return false, nil
	}
	return false, fmt.Errorf("spec.processingMode.%s %q is not Send or Skip", field, m)
}

func bodyMode(field string, m imv1alpha1.BodyMode) (bool, error) {
	switch m {
	case "", imv1alpha1.BodyModeNone:
		return false, nil
	case imv1alpha1.BodyModeFullDuplexStreamed:
		return true, nil
	}
	return false, fmt.Errorf("spec.processingMode.%s %q is not None or FullDuplexStreamed", field, m)
}

// ProcessorConditions are an ExternalProcessor's status conditions for
// res (lastTransitionTime left zero: the writer sets it).
func ProcessorConditions(res ProcessorResult, generation int64) []metav1.Condition {
	c := func(t string, ok bool, reason, msg string) metav1.Condition {
		st := metav1.ConditionFalse
		if ok {
			st = metav1.ConditionTrue
		}
		return metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg, ObservedGeneration: generation}
	}
	if !res.Accepted {
		return []metav1.Condition{
			c(imv1alpha1.ConditionAccepted, false, imv1alpha1.ReasonInvalid, res.Message),
			c(imv1alpha1.ConditionResolvedRefs, false, imv1alpha1.ReasonInvalid, "not resolved: the spec is not accepted"),
		}
	}
	accepted := c(imv1alpha1.ConditionAccepted, true, imv1alpha1.ReasonAccepted, "spec accepted")
	if !res.ResolvedRefs {
		return []metav1.Condition{accepted, c(imv1alpha1.ConditionResolvedRefs, false, res.Reason, res.Message)}
	}
	return []metav1.Condition{accepted, c(imv1alpha1.ConditionResolvedRefs, true, imv1alpha1.ReasonResolvedRefs, "Service port resolved")}
}

// resolveListenerFilters resolves the filters.requests of listener v
// (specs, as written), in v's namespace, into v.Filters, and records on v
// what the spec's status asks:
//
//   - a filter type infermesh does not serve (ExternalAuth as a listener
//     filter): Accepted=False/UnsupportedValue naming the filter; the
//     listener is not served, never served without it;
//   - an ExtensionRef to any kind but infermesh.io ExternalProcessor, to
//     one that does not exist or whose Service port or client TLS does
//     not resolve: ResolvedRefs=False/InvalidListenerFilterRef naming the
//     filter; the listener stays, and every request it accepts is
//     answered 500 (model.Listener.FilterError): it fails closed, and its
//     hostnames are never taken by another listener meanwhile;
//   - an ExternalProcessor whose spec is not accepted:
//     Accepted=False/InvalidListenerFilter;
//   - filters on a protocol other than HTTP or HTTPS (TLS, TCP):
//     Accepted=False/UnsupportedValue, the listener not served; on an API
//     server the CRD's CEL rule refuses the object first, a file-mode
//     manifest may not meet that rule.
//
// The first problem in list order is the one reported.
func resolveListenerFilters(v *ListenerView, specs []gwv1.ListenerFilter, lk *ListenerFilterLookups) {
	if len(specs) == 0 || !v.Accepted {
		return
	}
	if v.Protocol != gwv1.HTTPProtocolType && v.Protocol != gwv1.HTTPSProtocolType {
		v.Accepted, v.Reason = false, gwv1.ListenerReasonUnsupportedValue
		v.Message = fmt.Sprintf("filters may only be set when protocol is HTTP or HTTPS, not %s: the listener is not served rather than served without them", v.Protocol)
		return
	}
	refFailed := func(i int, format string, args ...any) {
		msg := fmt.Sprintf("filters.requests[%d]: ", i) + fmt.Sprintf(format, args...)
		if v.FilterError == "" {
			v.FilterError = msg
		}
		if v.ResolvedRefs {
			v.ResolvedRefs, v.RefsReason, v.RefsMessage = false, ListenerReasonInvalidListenerFilterRef, msg
		}
	}
	for i, f := range specs {
		switch f.Type {
		case gwv1.ListenerFilterExtensionRef:
		case gwv1.ListenerFilterExternalAuth:
			v.Accepted, v.Reason = false, gwv1.ListenerReasonUnsupportedValue
			v.Message = fmt.Sprintf("filters.requests[%d]: type ExternalAuth is not supported as a listener filter (only ExtensionRef to an %s.%s): "+
				"the listener is not served rather than served without it", i, imv1alpha1.GroupName, imv1alpha1.ExternalProcessorKind)
			v.Filters = nil
			return
		default:
			v.Accepted, v.Reason = false, gwv1.ListenerReasonUnsupportedValue
			v.Message = fmt.Sprintf("filters.requests[%d]: type %q is not supported", i, f.Type)
			v.Filters = nil
			return
		}
		ref := f.ExtensionRef
		if ref == nil {
			v.Accepted, v.Reason = false, ListenerReasonInvalidListenerFilter
			v.Message = fmt.Sprintf("filters.requests[%d]: type ExtensionRef without extensionRef", i)
			v.Filters = nil
			return
		}
		if string(ref.Group) != imv1alpha1.GroupName || string(ref.Kind) != imv1alpha1.ExternalProcessorKind {
			refFailed(i, "extensionRef kind %s in group %q is not supported: only %s in group %s", ref.Kind, ref.Group,
				imv1alpha1.ExternalProcessorKind, imv1alpha1.GroupName)
			continue
		}
		key := types.NamespacedName{Namespace: v.Namespace, Name: string(ref.Name)}
		var ep *imv1alpha1.ExternalProcessor
		if lk != nil && lk.ExternalProcessor != nil {
			ep = lk.ExternalProcessor(key)
		}
		if ep == nil {
			refFailed(i, "%s %s not found", imv1alpha1.ExternalProcessorKind, key)
			continue
		}
		res := ResolveExternalProcessor(ep, lk.Backends, lk.Options)
		if !res.Accepted {
			v.Accepted, v.Reason = false, ListenerReasonInvalidListenerFilter
			v.Message = fmt.Sprintf("filters.requests[%d]: %s %s is not accepted: %s", i, imv1alpha1.ExternalProcessorKind, key, res.Message)
			v.Filters = nil
			return
		}
		if !res.ResolvedRefs {
			refFailed(i, "%s %s does not resolve: %s", imv1alpha1.ExternalProcessorKind, key, res.Message)
			continue
		}
		v.Filters = append(v.Filters, model.ListenerFilter{Type: gwv1.ListenerFilterExtensionRef, Processor: res.Processor})
	}
	if v.FilterError != "" {
		v.Filters = nil
	}
}

// listenerFilterSpecs are a listener's filters.requests, nil without.
func listenerFilterSpecs(f *gwv1.ListenerFilters) []gwv1.ListenerFilter {
	if f == nil {
		return nil
	}
	return f.Requests
}
