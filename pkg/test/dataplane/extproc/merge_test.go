// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/google/go-cmp/cmp"
)

func overrides(o *extprocv3.ExtProcOverrides) *extprocv3.ExtProcPerRoute {
	return &extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: o}}
}

var disabledPerRoute = &extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Disabled{Disabled: true}}

// The cases follow FilterConfigPerRoute's merging constructor in Envoy's
// ext_proc.cc, one field at a time.
func TestMergePerRoute(t *testing.T) {
	route := overrides(&extprocv3.ExtProcOverrides{
		ProcessingMode:   seedMode(),
		GrpcService:      grpcTo("outbound|9002||epp-a"),
		FailureModeAllow: wrapperspb.Bool(true),
		MetadataOptions:  &extprocv3.MetadataOptions{ReceivingNamespaces: &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{"route"}}},
	})
	skipAll := &extprocv3.ProcessingMode{RequestHeaderMode: extprocv3.ProcessingMode_SKIP, ResponseHeaderMode: extprocv3.ProcessingMode_SKIP}
	for _, tc := range []struct {
		name       string
		less, more *extprocv3.ExtProcPerRoute
		want       *extprocv3.ExtProcPerRoute
	}{
		{"only the route", route, nil, route},
		{"only the weighted cluster", nil, route, route},
		{"more specific disabled wins", route, disabledPerRoute, disabledPerRoute},
		{
			"unset fields come from the less specific level",
			route, overrides(&extprocv3.ExtProcOverrides{GrpcService: grpcTo("outbound|9002||epp-b")}),
			overrides(&extprocv3.ExtProcOverrides{
				ProcessingMode:   seedMode(),
				GrpcService:      grpcTo("outbound|9002||epp-b"),
				FailureModeAllow: wrapperspb.Bool(true),
				MetadataOptions:  route.GetOverrides().GetMetadataOptions(),
			}),
		},
		{
			"set fields of the more specific level win, false included",
			route, overrides(&extprocv3.ExtProcOverrides{ProcessingMode: skipAll, FailureModeAllow: wrapperspb.Bool(false)}),
			overrides(&extprocv3.ExtProcOverrides{
				ProcessingMode:   skipAll,
				GrpcService:      grpcTo("outbound|9002||epp-a"),
				FailureModeAllow: wrapperspb.Bool(false),
				MetadataOptions:  route.GetOverrides().GetMetadataOptions(),
			}),
		},
		{
			"a disabled less specific level contributes nothing",
			disabledPerRoute, overrides(&extprocv3.ExtProcOverrides{GrpcService: grpcTo("outbound|9002||epp-b")}),
			overrides(&extprocv3.ExtProcOverrides{GrpcService: grpcTo("outbound|9002||epp-b")}),
		},
		{
			"namespace lists merge one by one",
			route, overrides(&extprocv3.ExtProcOverrides{MetadataOptions: &extprocv3.MetadataOptions{
				ForwardingNamespaces: &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{"cluster"}}}}),
			overrides(&extprocv3.ExtProcOverrides{
				ProcessingMode:   seedMode(),
				GrpcService:      grpcTo("outbound|9002||epp-a"),
				FailureModeAllow: wrapperspb.Bool(true),
				MetadataOptions: &extprocv3.MetadataOptions{
					ForwardingNamespaces: &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{"cluster"}},
					ReceivingNamespaces:  &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{"route"}},
				},
			}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MergePerRoute(tc.less, tc.more)
			if d := cmp.Diff(tc.want, got, protocmp.Transform()); d != "" {
				t.Errorf("merged (-want +got):\n%s", d)
			}
		})
	}
}

// The merged config is what Effective runs: a weighted cluster that only
// changes the processing mode still reaches the route's EPP with the
// route's failure mode.
func TestEffectiveOfMergedLevels(t *testing.T) {
	filter := &extprocv3.ExternalProcessor{GrpcService: grpcTo("placeholder"), ProcessingMode: &extprocv3.ProcessingMode{
		RequestHeaderMode: extprocv3.ProcessingMode_SKIP, ResponseHeaderMode: extprocv3.ProcessingMode_SKIP}}
	route := overrides(&extprocv3.ExtProcOverrides{GrpcService: grpcTo("outbound|9002||epp-a"), FailureModeAllow: wrapperspb.Bool(true)})
	cluster := overrides(&extprocv3.ExtProcOverrides{ProcessingMode: seedMode()})
	cfg, run, err := Effective(filter, true, MergePerRoute(route, cluster))
	if err != nil || !run {
		t.Fatalf("Effective: run %v, err %v", run, err)
	}
	if cfg.GrpcCluster != "outbound|9002||epp-a" || !cfg.FailureModeAllow {
		t.Errorf("cluster %q, failure_mode_allow %v: the route level's values must survive the weighted cluster's override",
			cfg.GrpcCluster, cfg.FailureModeAllow)
	}
	if d := cmp.Diff(seedMode(), cfg.ProcessingMode, protocmp.Transform()); d != "" {
		t.Errorf("processing mode (-want +got):\n%s", d)
	}
}
