// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// extProcBaseFilter is the listener-level ext_proc HTTP filter. It is there
// whenever inference is enabled, so that the first InferencePool route does
// not change LDS (a listener change drains connections), and it is inert:
//
//   - HttpFilter.disabled is true (unless the connection manager carries
//     listener filters, listenerfilter.go: then a pool route may be
//     selected only after the filters were created, and the filter is
//     created for every request, inert without an override): Envoy does
//     not even instantiate the filter
//     on a route that has no ext_proc entry in typed_per_filter_config (route,
//     virtual host or weighted cluster). An ExtProcPerRoute entry enables it
//     (Envoy treats any per-route config for a disabled filter as enabling
//     it). Ordinary routes therefore never reach an EPP and never fail
//     because of this filter.
//   - processing_mode sends nothing (headers and trailers SKIP, bodies
//     NONE), so even if enabled without an override it would not open a
//     stream.
//   - grpc_service names ExtProcPlaceholderCluster: the proto needs a target,
//     the filter above never uses it, and every override replaces it.
//     (Envoy creates the gRPC client lazily and does not check the cluster
//     when the listener is loaded.)
//
// metadata_options live here and not in the override, because an override
// that sets metadata_options replaces the lists: receiving_namespaces
// untyped ["envoy.lb"] lets the EPP's dynamic metadata (its pick) reach the
// OverrideHost load balancer; forwarding_namespaces untyped ["envoy.lb"]
// sends that namespace to the EPP.
//
// route_cache_action is RETAIN: the EPP adds the header
// x-gateway-destination-endpoint, and by default a header mutation clears
// the route cache and re-runs route selection; the pick is carried by
// metadata, the route must not change after the EPP answered.
//
// With model.EPPBodyModeStreamed (a GatewayClass parameter) the filter
// also carries the two settings of that mode that exist only at filter
// level (ExtProcOverrides has neither): send_body_without_waiting_for_
// header_response, and message_timeout EPPStreamedMessageTimeout. Both
// are ignored by Envoy while the processing mode is not STREAMED, so the
// inert filter stays inert.
func extProcBaseFilter(mode model.EPPBodyMode) (*hcmv3.HttpFilter, error) {
	cfg := &extprocv3.ExternalProcessor{
		GrpcService: grpcService(ExtProcPlaceholderCluster),
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode:   extprocv3.ProcessingMode_SKIP,
			ResponseHeaderMode:  extprocv3.ProcessingMode_SKIP,
			RequestBodyMode:     extprocv3.ProcessingMode_NONE,
			ResponseBodyMode:    extprocv3.ProcessingMode_NONE,
			RequestTrailerMode:  extprocv3.ProcessingMode_SKIP,
			ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
		},
		MetadataOptions: &extprocv3.MetadataOptions{
			ForwardingNamespaces: &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{MetadataNamespaceLB}},
			ReceivingNamespaces:  &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{MetadataNamespaceLB}},
		},
		RouteCacheAction: extprocv3.ExternalProcessor_RETAIN,
	}
	if mode == model.EPPBodyModeStreamed {
		cfg.SendBodyWithoutWaitingForHeaderResponse = true
		cfg.MessageTimeout = durationpb.New(EPPStreamedMessageTimeout)
	}
	a, err := toAny(cfg)
	if err != nil {
		return nil, err
	}
	return &hcmv3.HttpFilter{
		Name:       FilterExtProc,
		Disabled:   true,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a},
	}, nil
}

// extProcOverride is the ExtProcPerRoute that sends a pool's requests
// through its Endpoint Picker (GIE EPP protocol v1):
//
//   - overrides.processing_mode: request and response headers SEND, bodies
//     FULL_DUPLEX_STREAMED, trailers SEND (full duplex requires trailers
//     SEND), as the seed shows;
//   - overrides.grpc_service: envoy_grpc to the EPP's cluster
//     outbound|<epp port>||<epp host>;
//   - overrides.failure_mode_allow: true only for endpointPickerRef
//     failureMode FailOpen (then a failed EPP call falls through to the
//     OverrideHost fallback, round robin); false for FailClose, set
//     explicitly. Envoy's limit, not ours: once a request body has been
//     handed to the processor in FULL_DUPLEX_STREAMED mode Envoy no longer
//     honours failure_mode_allow (its ext_proc filter cannot replay a body
//     it streamed away), so FailOpen covers requests without a body and
//     failures Envoy sees before the stream starts (no EPP cluster, no
//     healthy EPP endpoint); a POST whose EPP stream fails later gets a
//     500. Envoy also refuses FULL_DUPLEX_STREAMED with failure_mode_allow
//     in the listener-level filter, which is why both live in this
//     per-route override only.
//
// Timeouts, chosen knowingly: with FULL_DUPLEX_STREAMED bodies Envoy applies
// no per-message timeout (ExternalProcessor.message_timeout is ignored in
// that mode), and the gRPC stream lives as long as the HTTP stream because
// the response body streams through the EPP too. So grpc_service.timeout is
// left unset (no stream deadline): a deadline would cut long LLM responses.
// What bounds a hung EPP (a processor that accepts the stream and never
// answers) is the route's timeouts.request, which buildAction (route.go)
// also writes as RouteAction.max_stream_duration: Envoy's connection
// manager counts that from the stream's start, so it covers a request still
// held by ext_proc, whereas RouteAction.timeout starts only when the router
// sees the request (tests/integration/pilot/gie TestEPPHung). Without
// timeouts.request only the connection manager's stream_idle_timeout
// (Envoy default 5 minutes without bytes either way) ends it.
//
// metadata_options are not set: they would replace the base filter's lists.
//
// mode model.EPPBodyModeStreamed (a GatewayClass parameter, see
// architecture/xds.md "EPP request body mode") changes the processing mode
// only: request body STREAMED (each chunk goes to the EPP at once, without
// waiting for its headers response, because the listener filter sets
// send_body_without_waiting_for_header_response; the EPP answers each
// chunk, and no mutation means unchanged), response body NONE, trailers
// SKIP. Then failure_mode_allow holds for requests with bodies too: Envoy
// ends it only for FULL_DUPLEX_STREAMED (Filter::failureModeAllow), since
// STREAMED keeps each chunk until the EPP answers and hands the kept
// chunks on when the EPP fails. Envoy's per-message timer runs in this
// mode: see EPPStreamedMessageTimeout.
func extProcOverride(epp *model.EPPBackend, mode model.EPPBodyMode) *extprocv3.ExtProcPerRoute {
	return &extprocv3.ExtProcPerRoute{
		Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{
			ProcessingMode:   eppProcessingMode(mode),
			GrpcService:      grpcService(eppClusterName(epp)),
			FailureModeAllow: wrapperspb.Bool(epp.FailureMode == inferencev1.EndpointPickerFailOpen),
		}},
	}
}

// eppProcessingMode is the ProcessingMode of a pool's routes in mode.
func eppProcessingMode(mode model.EPPBodyMode) *extprocv3.ProcessingMode {
	if mode == model.EPPBodyModeStreamed {
		return &extprocv3.ProcessingMode{
			RequestHeaderMode:   extprocv3.ProcessingMode_SEND,
			ResponseHeaderMode:  extprocv3.ProcessingMode_SEND,
			RequestBodyMode:     extprocv3.ProcessingMode_STREAMED,
			ResponseBodyMode:    extprocv3.ProcessingMode_NONE,
			RequestTrailerMode:  extprocv3.ProcessingMode_SKIP,
			ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
		}
	}
	return &extprocv3.ProcessingMode{
		RequestHeaderMode:   extprocv3.ProcessingMode_SEND,
		ResponseHeaderMode:  extprocv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED,
		ResponseBodyMode:    extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED,
		RequestTrailerMode:  extprocv3.ProcessingMode_SEND,
		ResponseTrailerMode: extprocv3.ProcessingMode_SEND,
	}
}

// EPPStreamedMessageTimeout is ExternalProcessor.message_timeout for
// Gateways in model.EPPBodyModeStreamed, chosen knowingly (the
// "Decisions" table of architecture/xds.md). In STREAMED mode Envoy's
// per-message timer runs (default 200 ms): it starts with the request
// headers and again with every body chunk sent, and stops at each answer.
// An EPP that picks from the body answers the headers only after the
// body's last chunk, so the timer measures both the client's gaps while
// uploading the body and the EPP's own time to pick, including any time it
// queues the request when its model servers are saturated. A short value
// would turn a slow upload or a queued request into a 504 on a FailClose
// pool and, on a FailOpen pool, into a request sent past the EPP exactly
// when load control matters. So it is set above the bounds that already
// end a stalled exchange, the connection manager's stream_idle_timeout
// (Envoy's 5 min, reset by every byte) and the route's timeouts.request
// (max_stream_duration): as in FULL_DUPLEX_STREAMED mode, where Envoy runs
// no timer, those decide. 1000 s is also Istio's value, so an EPP behaves
// the same behind both. (Envoy accepts at most 3600 s.)
const EPPStreamedMessageTimeout = 1000 * time.Second

// eppClusterName is the cluster of a pool's Endpoint Picker.
func eppClusterName(epp *model.EPPBackend) string {
	return ClusterName(uint32(epp.Port), epp.Host)
}

func grpcService(cluster string) *corev3.GrpcService {
	return &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: cluster}},
	}
}
