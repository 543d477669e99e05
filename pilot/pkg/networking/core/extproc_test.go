// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// extProcFilterOf unpacks the listener's ext_proc filter config.
func extProcFilterOf(t *testing.T, res Resources) *extprocv3.ExternalProcessor {
	t.Helper()
	for _, f := range hcmOf(t, res, res.Listeners[0].Name).GetHttpFilters() {
		if f.GetName() != FilterExtProc {
			continue
		}
		ep := &extprocv3.ExternalProcessor{}
		if err := f.GetTypedConfig().UnmarshalTo(ep); err != nil {
			t.Fatal(err)
		}
		return ep
	}
	t.Fatal("no ext_proc filter")
	return nil
}

// The default body mode is the EPP protocol's FULL_DUPLEX_STREAMED, and the
// listener filter carries neither STREAMED setting.
func TestEPPBodyModeDefaultFullDuplex(t *testing.T) {
	res := build(t, seedGateway(), seedInputs(), inferenceOn)
	ep := extProcFilterOf(t, res)
	if ep.GetSendBodyWithoutWaitingForHeaderResponse() || ep.GetMessageTimeout() != nil {
		t.Errorf("default filter has send_body_without_waiting %v, message_timeout %v; want neither",
			ep.GetSendBodyWithoutWaitingForHeaderResponse(), ep.GetMessageTimeout())
	}
	per := extProcOf(t, routesOf(t, res, "http.80", seed.Hostname+":80")[0].GetTypedPerFilterConfig())
	assertEPPOverride(t, per, seedEPPCluster, true)
}

// EPPBodyModeStreamed: the route's override streams the request body
// (STREAMED), sends no response body and no trailers; the listener filter
// sends chunks without waiting for the headers response and sets the
// chosen message_timeout. Everything else is as in the default mode.
func TestEPPBodyModeStreamed(t *testing.T) {
	gw := seedGateway()
	gw.EPPBodyMode = model.EPPBodyModeStreamed
	res := build(t, gw, seedInputs(), inferenceOn)

	ep := extProcFilterOf(t, res)
	if !ep.GetSendBodyWithoutWaitingForHeaderResponse() || ep.GetMessageTimeout().AsDuration() != 1000*time.Second {
		t.Errorf("filter send_body_without_waiting %v message_timeout %v, want true and 1000s",
			ep.GetSendBodyWithoutWaitingForHeaderResponse(), ep.GetMessageTimeout())
	}
	if ep.GetProcessingMode().GetRequestBodyMode() != extprocv3.ProcessingMode_NONE || ep.GetProcessingMode().GetRequestHeaderMode() != extprocv3.ProcessingMode_SKIP {
		t.Errorf("listener filter must stay inert: %v", ep.GetProcessingMode())
	}

	per := extProcOf(t, routesOf(t, res, "http.80", seed.Hostname+":80")[0].GetTypedPerFilterConfig())
	o := per.GetOverrides()
	want := &extprocv3.ProcessingMode{
		RequestHeaderMode: extprocv3.ProcessingMode_SEND, ResponseHeaderMode: extprocv3.ProcessingMode_SEND,
		RequestBodyMode: extprocv3.ProcessingMode_STREAMED, ResponseBodyMode: extprocv3.ProcessingMode_NONE,
		RequestTrailerMode: extprocv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
	}
	if !proto.Equal(o.GetProcessingMode(), want) {
		t.Errorf("processing mode = %v, want %v", o.GetProcessingMode(), want)
	}
	if o.GetGrpcService().GetEnvoyGrpc().GetClusterName() != seedEPPCluster || !o.GetFailureModeAllow().GetValue() || o.GetMetadataOptions() != nil {
		t.Errorf("override = %v, want the EPP cluster, failure_mode_allow true (FailOpen), no metadata_options", o)
	}
}

// A Gateway whose class parameters do not resolve is refused whole, so the
// push path keeps its proxies' last configuration.
func TestClassParametersErrorRefusesGateway(t *testing.T) {
	gw := seedGateway()
	gw.ClassParametersError = `ConfigMap infermesh-system/params: key eppRequestBodyMode: "Buffered" is not one of FullDuplexStreamed, Streamed`
	_, err := BuildGateway(gw, seedInputs(), inferenceOn)
	if err == nil || !strings.Contains(err.Error(), "invalid parameters (GatewayClass or Gateway)") || !strings.Contains(err.Error(), "eppRequestBodyMode") {
		t.Fatalf("BuildGateway error = %v, want the class parameters' problem", err)
	}
}
