// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/proto"
)

// MergePerRoute is the ExtProcPerRoute a request sees when more than one
// level of the route table carries one: Envoy's ext_proc filter collects
// every level's config from the least specific (virtual host, route) to the
// most specific (the picked weighted cluster) and folds them pairwise with
// the merging constructor of FilterConfigPerRoute
// (source/extensions/filters/http/ext_proc/ext_proc.cc,
// Filter::mergePerRouteConfig). Field by field:
//
//   - disabled is the more specific level's;
//   - processing_mode: none when the more specific level is disabled, else
//     the more specific one's when set, else the less specific one's;
//   - grpc_service, failure_mode_allow and each of metadata_options'
//     forwarding_namespaces and receiving_namespaces: the more specific
//     one's when set, else the less specific one's.
//
// A disabled level carries no overrides (they are a oneof), so it
// contributes nothing but its flag. Either argument may be nil (that level
// has no config); the result shares no messages with the arguments' parents
// but may share the arguments' sub-messages, which callers only read.
func MergePerRoute(less, more *extprocv3.ExtProcPerRoute) *extprocv3.ExtProcPerRoute {
	switch {
	case less == nil:
		return more
	case more == nil:
		return less
	case more.GetDisabled():
		return &extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Disabled{Disabled: true}}
	}
	lo, mo := less.GetOverrides(), more.GetOverrides()
	out := &extprocv3.ExtProcOverrides{
		ProcessingMode:   pick(mo.GetProcessingMode(), lo.GetProcessingMode()),
		GrpcService:      pick(mo.GetGrpcService(), lo.GetGrpcService()),
		FailureModeAllow: pick(mo.GetFailureModeAllow(), lo.GetFailureModeAllow()),
	}
	fwd := pick(mo.GetMetadataOptions().GetForwardingNamespaces(), lo.GetMetadataOptions().GetForwardingNamespaces())
	recv := pick(mo.GetMetadataOptions().GetReceivingNamespaces(), lo.GetMetadataOptions().GetReceivingNamespaces())
	if fwd != nil || recv != nil {
		out.MetadataOptions = &extprocv3.MetadataOptions{ForwardingNamespaces: fwd, ReceivingNamespaces: recv}
	}
	return &extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: out}}
}

// pick is the more specific value when set, else the less specific one.
func pick[M proto.Message](more, less M) M {
	if more.ProtoReflect().IsValid() {
		return more
	}
	return less
}
