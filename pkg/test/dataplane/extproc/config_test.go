// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"errors"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func grpcTo(cluster string) *corev3.GrpcService {
	return &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: cluster}}}
}

// baseFilter is the shape of our listener-level filter: inert modes, the
// envoy.lb namespaces, RETAIN.
func baseFilter() *extprocv3.ExternalProcessor {
	return &extprocv3.ExternalProcessor{
		GrpcService: grpcTo("placeholder"),
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode: extprocv3.ProcessingMode_SKIP, ResponseHeaderMode: extprocv3.ProcessingMode_SKIP,
			RequestTrailerMode: extprocv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
		},
		MetadataOptions:  lbOptions(),
		RouteCacheAction: extprocv3.ExternalProcessor_RETAIN,
	}
}

func seedOverride(allow bool) *extprocv3.ExtProcPerRoute {
	return &extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{
		ProcessingMode: seedMode(), GrpcService: grpcTo("outbound|9002||epp.ns.svc.cluster.local"),
		FailureModeAllow: wrapperspb.Bool(allow),
	}}}
}

func TestEffective(t *testing.T) {
	// The seed's override on our inert, disabled base filter.
	cfg, ok, err := Effective(baseFilter(), true, seedOverride(true))
	if err != nil || !ok {
		t.Fatalf("seed override: ok=%v err=%v", ok, err)
	}
	if cfg.GrpcCluster != "outbound|9002||epp.ns.svc.cluster.local" || cfg.Authority != "" || !cfg.FailureModeAllow ||
		!proto.Equal(cfg.ProcessingMode, seedMode()) || !proto.Equal(cfg.MetadataOptions, lbOptions()) ||
		cfg.RouteCacheAction != extprocv3.ExternalProcessor_RETAIN || cfg.StatusOnError != 500 {
		t.Errorf("merged config = %+v", cfg)
	}

	for name, tc := range map[string]struct {
		filterDisabled bool
		perRoute       *extprocv3.ExtProcPerRoute
	}{
		"disabled filter, no per-route": {true, nil},
		"per-route disabled":            {false, &extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Disabled{Disabled: true}}},
		"inert modes":                   {false, nil},
	} {
		if _, ok, err := Effective(baseFilter(), tc.filterDisabled, tc.perRoute); ok || err != nil {
			t.Errorf("%s: ok=%v err=%v, want not running", name, ok, err)
		}
	}

	// metadata_options in an override replace only the lists it sets.
	o := seedOverride(false)
	o.GetOverrides().MetadataOptions = &extprocv3.MetadataOptions{
		ReceivingNamespaces: &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{"other"}}}
	cfg, _, err = Effective(baseFilter(), true, o)
	if err != nil || cfg.MetadataOptions.GetForwardingNamespaces().GetUntyped()[0] != "envoy.lb" ||
		cfg.MetadataOptions.GetReceivingNamespaces().GetUntyped()[0] != "other" || cfg.FailureModeAllow {
		t.Errorf("metadata merge: %v %v", cfg.MetadataOptions, err)
	}

	// Filter-level checks Envoy applies (it NACKs), and fields not implemented.
	fdNoTrailers := baseFilter()
	fdNoTrailers.ProcessingMode.RequestBodyMode = extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED
	fdAllow := baseFilter()
	fdAllow.ProcessingMode = seedMode()
	fdAllow.FailureModeAllow = true
	streamed := seedOverride(false)
	streamed.GetOverrides().ProcessingMode = &extprocv3.ProcessingMode{RequestBodyMode: extprocv3.ProcessingMode_STREAMED}
	modeOverride := baseFilter()
	modeOverride.AllowModeOverride = true
	noWaitFilter := baseFilter()
	noWaitFilter.SendBodyWithoutWaitingForHeaderResponse = true
	streamedTrailers := seedOverride(false)
	streamedTrailers.GetOverrides().ProcessingMode = &extprocv3.ProcessingMode{
		RequestBodyMode: extprocv3.ProcessingMode_STREAMED, RequestTrailerMode: extprocv3.ProcessingMode_SEND}
	streamedResp := seedOverride(false)
	streamedResp.GetOverrides().ProcessingMode = &extprocv3.ProcessingMode{ResponseBodyMode: extprocv3.ProcessingMode_STREAMED}
	for name, tc := range map[string]struct {
		filter *extprocv3.ExternalProcessor
		route  *extprocv3.ExtProcPerRoute
		want   error
	}{
		"FULL_DUPLEX without trailer SEND":                {fdNoTrailers, nil, ErrInvalid},
		"FULL_DUPLEX with failure allowed":                {fdAllow, nil, ErrInvalid},
		"STREAMED body without send_body_without_waiting": {baseFilter(), streamed, ErrNotImplemented},
		"STREAMED body with trailer SEND":                 {noWaitFilter, streamedTrailers, ErrNotImplemented},
		"STREAMED response body":                          {noWaitFilter, streamedResp, ErrNotImplemented},
		"allow_mode_override":                             {modeOverride, nil, ErrNotImplemented},
	} {
		if _, _, err := Effective(tc.filter, false, tc.route); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	// STREAMED request body with send_body_without_waiting_for_header_response
	// and message_timeout on the filter: implemented.
	noWaitFilter.MessageTimeout = durationpb.New(1000 * time.Second)
	cfg, ok, err = Effective(noWaitFilter, true, streamed)
	if err != nil || !ok || !cfg.SendBodyWithoutWaiting || cfg.MessageTimeout != 1000*time.Second {
		t.Errorf("STREAMED with send_body_without_waiting: ok=%v err=%v cfg=%+v", ok, err, cfg)
	}
}
