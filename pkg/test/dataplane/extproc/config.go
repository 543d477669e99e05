// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"errors"
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
)

// DefaultMessageTimeout is ExternalProcessor.message_timeout when unset
// (Envoy's default, 200 ms).
const DefaultMessageTimeout = 200 * time.Millisecond

// Config is the ext_proc configuration in effect for one request.
type Config struct {
	GrpcCluster      string        // envoy_grpc.cluster_name
	Authority        string        // envoy_grpc.authority, "" = cluster name
	Timeout          time.Duration // grpc_service.timeout (0 = none); see Process: Envoy does not apply it to the ext_proc stream
	ProcessingMode   *extprocv3.ProcessingMode
	FailureModeAllow bool
	MetadataOptions  *extprocv3.MetadataOptions
	RouteCacheAction extprocv3.ExternalProcessor_RouteCacheAction
	// MutationRules are ExternalProcessor.mutation_rules: which header
	// changes of the processor take effect (headers.go).
	MutationRules MutationRules

	// MessageTimeout is ExternalProcessor.message_timeout (default 200 ms).
	// Each direction has its own timer, as each of Envoy's ProcessorStates
	// does; a direction whose body mode is FULL_DUPLEX_STREAMED runs none
	// (ProcessorState::onStartProcessorCall, processor_state.cc).
	MessageTimeout time.Duration
	// SendBodyWithoutWaiting is
	// ExternalProcessor.send_body_without_waiting_for_header_response: in
	// STREAMED request body mode, body chunks go to the processor while its
	// request headers response is still pending (Filter::onData,
	// ext_proc.cc). It is also sent in protocol_config.
	SendBodyWithoutWaiting bool
	// StatusOnError is ExternalProcessor.status_on_error: the local reply
	// status for a failed stream or a rejected response (default 500). A
	// per-message timeout always answers 504.
	StatusOnError int
	// AllowContentLengthHeader is ExternalProcessor.allow_content_length_header:
	// when false (the default) content-length is removed from headers whose
	// body streams through the processor in FULL_DUPLEX_STREAMED mode.
	AllowContentLengthHeader bool
	// Counters receives this request's counts; nil means DefaultCounters.
	Counters *Counters
}

// ErrNotImplemented is wrapped by Effective's errors for a set field this
// package does not implement; the test data plane NACKs such config.
var ErrNotImplemented = errors.New("not implemented by the test data plane")

// ErrInvalid is wrapped by Effective's errors for config Envoy itself
// rejects (Envoy NACKs it).
var ErrInvalid = errors.New("invalid ext_proc config")

// Effective merges the HCM filter config (and its `disabled` flag) with a
// per-route (or per-weighted-cluster) override following Envoy's rules:
//
//   - HttpFilter.disabled: the filter does not run unless the route carries
//     per-route config for it (any ExtProcPerRoute enables it);
//   - ExtProcPerRoute.disabled: the filter does not run for this route;
//   - overrides.processing_mode replaces the filter's processing_mode as a
//     whole; overrides.grpc_service replaces grpc_service;
//     overrides.failure_mode_allow, when set, replaces failure_mode_allow;
//     overrides.metadata_options replaces forwarding_namespaces and
//     receiving_namespaces each only when the override sets that list
//     (Envoy's FilterConfigPerRoute keeps them as separate optionals).
//
// Envoy validates the processing mode only on the filter config
// (FULL_DUPLEX_STREAMED needs the trailer mode SEND and failure_mode_allow
// false there); a per-route override is not validated, and neither is it
// here. ok=false: ext_proc does not run for this request (also when the
// merged mode sends nothing, as Envoy then never opens a stream). err names
// any set field this package does not implement, or config Envoy rejects.
func Effective(filter *extprocv3.ExternalProcessor, filterDisabled bool, perRoute *extprocv3.ExtProcPerRoute) (cfg Config, ok bool, err error) {
	if filter == nil {
		return Config{}, false, nil
	}
	if err := filter.ValidateAll(); err != nil {
		return Config{}, false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := checkFilter(filter); err != nil {
		return Config{}, false, err
	}
	if perRoute != nil {
		if err := perRoute.ValidateAll(); err != nil {
			return Config{}, false, fmt.Errorf("%w: per-route: %v", ErrInvalid, err)
		}
		if err := checkOverrides(perRoute.GetOverrides()); err != nil {
			return Config{}, false, err
		}
	}

	cfg = Config{
		ProcessingMode:           filter.GetProcessingMode(),
		FailureModeAllow:         filter.GetFailureModeAllow(),
		MetadataOptions:          filter.GetMetadataOptions(),
		RouteCacheAction:         filter.GetRouteCacheAction(),
		MessageTimeout:           DefaultMessageTimeout,
		StatusOnError:            500,
		AllowContentLengthHeader: filter.GetAllowContentLengthHeader(),
		SendBodyWithoutWaiting:   filter.GetSendBodyWithoutWaitingForHeaderResponse(),
	}
	if filter.GetDisableClearRouteCache() {
		cfg.RouteCacheAction = extprocv3.ExternalProcessor_RETAIN
	}
	if mr := filter.GetMutationRules(); mr != nil {
		cfg.MutationRules = MutationRules{
			AllowAllRouting: mr.GetAllowAllRouting().GetValue(),
			AllowEnvoy:      mr.GetAllowEnvoy().GetValue(),
			DisallowSystem:  mr.GetDisallowSystem().GetValue(),
			DisallowAll:     mr.GetDisallowAll().GetValue(),
			DisallowIsError: mr.GetDisallowIsError().GetValue(),
		}
	}
	if d := filter.GetMessageTimeout(); d != nil {
		cfg.MessageTimeout = d.AsDuration()
	}
	if s := filter.GetStatusOnError(); s != nil && s.GetCode() != 0 {
		cfg.StatusOnError = int(s.GetCode())
	}
	grpcSvc := filter.GetGrpcService()

	if perRoute == nil {
		if filterDisabled {
			return Config{}, false, nil
		}
	} else {
		if perRoute.GetDisabled() {
			return Config{}, false, nil
		}
		o := perRoute.GetOverrides()
		if o.GetProcessingMode() != nil {
			cfg.ProcessingMode = o.GetProcessingMode()
		}
		if o.GetGrpcService() != nil {
			grpcSvc = o.GetGrpcService()
		}
		if o.GetFailureModeAllow() != nil {
			cfg.FailureModeAllow = o.GetFailureModeAllow().GetValue()
		}
		if mo := o.GetMetadataOptions(); mo != nil {
			merged := &extprocv3.MetadataOptions{
				ForwardingNamespaces: cfg.MetadataOptions.GetForwardingNamespaces(),
				ReceivingNamespaces:  cfg.MetadataOptions.GetReceivingNamespaces(),
			}
			if mo.GetForwardingNamespaces() != nil {
				merged.ForwardingNamespaces = mo.GetForwardingNamespaces()
			}
			if mo.GetReceivingNamespaces() != nil {
				merged.ReceivingNamespaces = mo.GetReceivingNamespaces()
			}
			cfg.MetadataOptions = merged
		}
	}

	if err := checkGrpcService(grpcSvc); err != nil {
		return Config{}, false, err
	}
	cfg.GrpcCluster = grpcSvc.GetEnvoyGrpc().GetClusterName()
	cfg.Authority = grpcSvc.GetEnvoyGrpc().GetAuthority()
	if t := grpcSvc.GetTimeout(); t != nil {
		cfg.Timeout = t.AsDuration()
	}
	if err := checkMode(cfg.ProcessingMode, cfg.SendBodyWithoutWaiting); err != nil {
		return Config{}, false, err
	}
	if !sendsAnything(cfg.ProcessingMode) {
		return Config{}, false, nil
	}
	return cfg, true, nil
}

func notImpl(field string) error { return fmt.Errorf("%w: %s", ErrNotImplemented, field) }

// checkFilter applies Envoy's filter-config checks (config.cc
// verifyFilterConfig) and rejects fields outside this package.
func checkFilter(f *extprocv3.ExternalProcessor) error {
	if f.GetHttpService() != nil {
		return notImpl("http_service")
	}
	if f.GetGrpcService() == nil {
		return fmt.Errorf("%w: one and only one of grpc_service or http_service must be set", ErrInvalid)
	}
	if f.GetDisableClearRouteCache() && f.GetRouteCacheAction() != extprocv3.ExternalProcessor_DEFAULT {
		return fmt.Errorf("%w: disable_clear_route_cache and route_cache_action both set", ErrInvalid)
	}
	pm := f.GetProcessingMode()
	fd := extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED
	if pm.GetRequestBodyMode() == fd && pm.GetRequestTrailerMode() != extprocv3.ProcessingMode_SEND {
		return fmt.Errorf("%w: request_body_mode FULL_DUPLEX_STREAMED needs request_trailer_mode SEND", ErrInvalid)
	}
	if pm.GetResponseBodyMode() == fd && pm.GetResponseTrailerMode() != extprocv3.ProcessingMode_SEND {
		return fmt.Errorf("%w: response_body_mode FULL_DUPLEX_STREAMED needs response_trailer_mode SEND", ErrInvalid)
	}
	if (pm.GetRequestBodyMode() == fd || pm.GetResponseBodyMode() == fd) && f.GetFailureModeAllow() {
		return fmt.Errorf("%w: FULL_DUPLEX_STREAMED body mode needs failure_mode_allow false", ErrInvalid)
	}
	switch {
	case len(f.GetRequestAttributes()) > 0:
		return notImpl("request_attributes")
	case len(f.GetResponseAttributes()) > 0:
		return notImpl("response_attributes")
	case f.GetMutationRules().GetAllowExpression() != nil:
		return notImpl("mutation_rules.allow_expression")
	case f.GetMutationRules().GetDisallowExpression() != nil:
		return notImpl("mutation_rules.disallow_expression")
	case f.GetForwardRules() != nil:
		return notImpl("forward_rules")
	case f.GetAllowModeOverride():
		return notImpl("allow_mode_override")
	case f.GetDisableImmediateResponse():
		return notImpl("disable_immediate_response")
	case f.GetObservabilityMode():
		return notImpl("observability_mode")
	case f.GetProcessingRequestModifier() != nil:
		return notImpl("processing_request_modifier")
	case f.GetOnProcessingResponse() != nil:
		return notImpl("on_processing_response")
	case len(f.GetMetadataOptions().GetClusterMetadataForwardingNamespaces().GetUntyped()) > 0 ||
		len(f.GetMetadataOptions().GetClusterMetadataForwardingNamespaces().GetTyped()) > 0:
		return notImpl("metadata_options.cluster_metadata_forwarding_namespaces")
	}
	return nil
}

func checkOverrides(o *extprocv3.ExtProcOverrides) error {
	switch {
	case o == nil:
		return nil
	//lint:ignore SA1019 a deprecated field that is set must still be refused, not ignored
	case o.GetAsyncMode():
		return notImpl("overrides.async_mode")
	case len(o.GetRequestAttributes()) > 0:
		return notImpl("overrides.request_attributes")
	case len(o.GetResponseAttributes()) > 0:
		return notImpl("overrides.response_attributes")
	case len(o.GetGrpcInitialMetadata()) > 0:
		return notImpl("overrides.grpc_initial_metadata")
	case o.GetProcessingRequestModifier() != nil:
		return notImpl("overrides.processing_request_modifier")
	case o.GetMetadataOptions().GetClusterMetadataForwardingNamespaces() != nil:
		return notImpl("overrides.metadata_options.cluster_metadata_forwarding_namespaces")
	}
	return nil
}

func checkGrpcService(g *corev3.GrpcService) error {
	switch {
	case g.GetGoogleGrpc() != nil:
		return notImpl("grpc_service.google_grpc")
	case g.GetEnvoyGrpc() == nil:
		return fmt.Errorf("%w: grpc_service without envoy_grpc", ErrInvalid)
	case g.GetEnvoyGrpc().GetClusterName() == "":
		return fmt.Errorf("%w: grpc_service.envoy_grpc.cluster_name empty", ErrInvalid)
	case len(g.GetInitialMetadata()) > 0:
		return notImpl("grpc_service.initial_metadata")
	case g.GetRetryPolicy() != nil:
		return notImpl("grpc_service.retry_policy")
	}
	return nil
}

// checkMode accepts the modes Process implements: headers and trailers
// DEFAULT/SEND/SKIP; bodies NONE and FULL_DUPLEX_STREAMED; a trailer mode
// SEND only together with a FULL_DUPLEX_STREAMED body (the pairing Envoy
// requires for that body mode); and a STREAMED request body, with its
// trailer mode not SEND, only with send_body_without_waiting (the mode a
// GatewayClass parameter selects, see architecture/dataplane.md).
// STREAMED without that flag (the body held until the headers response),
// a STREAMED response body, BUFFERED, BUFFERED_PARTIAL and GRPC are not
// implemented.
func checkMode(pm *extprocv3.ProcessingMode, sendBodyWithoutWaiting bool) error {
	for _, b := range []struct {
		name     string
		mode     extprocv3.ProcessingMode_BodySendMode
		tr       extprocv3.ProcessingMode_HeaderSendMode
		streamed bool // STREAMED is implemented in this direction
	}{
		{"request", pm.GetRequestBodyMode(), pm.GetRequestTrailerMode(), sendBodyWithoutWaiting},
		{"response", pm.GetResponseBodyMode(), pm.GetResponseTrailerMode(), false},
	} {
		switch b.mode {
		case extprocv3.ProcessingMode_NONE:
			if b.tr == extprocv3.ProcessingMode_SEND {
				return notImpl(b.name + "_trailer_mode SEND with " + b.name + "_body_mode NONE")
			}
		case extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		case extprocv3.ProcessingMode_STREAMED:
			switch {
			case b.name == "request" && !b.streamed:
				return notImpl("request_body_mode STREAMED without send_body_without_waiting_for_header_response")
			case !b.streamed:
				return notImpl(b.name + "_body_mode STREAMED")
			case b.tr == extprocv3.ProcessingMode_SEND:
				return notImpl(b.name + "_trailer_mode SEND with " + b.name + "_body_mode STREAMED")
			}
		default:
			return notImpl(b.name + "_body_mode " + b.mode.String())
		}
	}
	return nil
}

// Mode helpers, with ProcessingMode's defaults: headers DEFAULT means SEND,
// trailers DEFAULT means SKIP (Envoy's ProcessorState::setProcessingMode).

func sendReqHeaders(pm *extprocv3.ProcessingMode) bool {
	return pm.GetRequestHeaderMode() != extprocv3.ProcessingMode_SKIP
}

func sendRespHeaders(pm *extprocv3.ProcessingMode) bool {
	return pm.GetResponseHeaderMode() != extprocv3.ProcessingMode_SKIP
}

func sendReqTrailers(pm *extprocv3.ProcessingMode) bool {
	return pm.GetRequestTrailerMode() == extprocv3.ProcessingMode_SEND
}

func sendRespTrailers(pm *extprocv3.ProcessingMode) bool {
	return pm.GetResponseTrailerMode() == extprocv3.ProcessingMode_SEND
}

func duplexReq(pm *extprocv3.ProcessingMode) bool {
	return pm.GetRequestBodyMode() == extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED
}

func duplexResp(pm *extprocv3.ProcessingMode) bool {
	return pm.GetResponseBodyMode() == extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED
}

// streamedReq: the request body goes in STREAMED mode (checkMode allows it
// only with send_body_without_waiting_for_header_response).
func streamedReq(pm *extprocv3.ProcessingMode) bool {
	return pm.GetRequestBodyMode() == extprocv3.ProcessingMode_STREAMED
}

// reqBodyToProcessor: request body chunks go to the processor, which may
// change them, so content-length cannot be trusted
// (ProcessorState::shouldRemoveContentLength, processor_state.h).
func reqBodyToProcessor(pm *extprocv3.ProcessingMode) bool {
	return duplexReq(pm) || streamedReq(pm)
}

func sendsAnything(pm *extprocv3.ProcessingMode) bool {
	return sendReqHeaders(pm) || sendRespHeaders(pm) || reqBodyToProcessor(pm) || duplexResp(pm) ||
		sendReqTrailers(pm) || sendRespTrailers(pm)
}
