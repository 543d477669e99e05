// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// toAny wraps m in an Any, marshalled deterministically so that equal
// inputs give equal bytes (maps inside m are sorted).
func toAny(m proto.Message) (*anypb.Any, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return &anypb.Any{TypeUrl: "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName()), Value: b}, nil
}

// adsConfigSource is a ConfigSource that fetches over the ADS stream the
// resource came from, with the v3 transport, and waits for it without a
// bound: initial_fetch_timeout 0 disables Envoy's 15 s default, after
// which a warming cluster would start with no endpoints and a warming
// listener with no routes (GrpcSubscriptionImpl::start arms the timer only
// for a positive value). The previous cluster or listener keeps serving
// while its replacement waits; the server always sends what it waits for
// (pilot/pkg/xds, warming.go). See architecture/xds.md, "Initial fetch".
func adsConfigSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		InitialFetchTimeout:   durationpb.New(0),
	}
}
