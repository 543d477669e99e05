// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Node metadata keys that map a proxy to its Gateway (Node.metadata, a
// google.protobuf.Struct, string values). Both are required.
const (
	// MetadataGatewayNamespace is the Gateway's metadata.namespace.
	MetadataGatewayNamespace = "GATEWAY_NAMESPACE"
	// MetadataGatewayName is the Gateway's metadata.name.
	MetadataGatewayName = "GATEWAY_NAME"
)

// gatewayOf returns the key ("namespace/name", model.Gateway.ResourceName)
// of the Gateway that node serves. A node without both metadata keys as
// non-empty strings is an error with gRPC code InvalidArgument, which ends
// the stream.
func gatewayOf(node *corev3.Node) (string, error) {
	f := node.GetMetadata().GetFields()
	ns := f[MetadataGatewayNamespace].GetStringValue()
	name := f[MetadataGatewayName].GetStringValue()
	if ns == "" || name == "" {
		return "", status.Errorf(codes.InvalidArgument,
			"node %q: node.metadata must carry the Gateway as string fields %s and %s",
			node.GetId(), MetadataGatewayNamespace, MetadataGatewayName)
	}
	return fmt.Sprintf("%s/%s", ns, name), nil
}
