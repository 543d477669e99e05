// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// Local reply bodies, as Envoy writes them.
const (
	bodyNoHealthyUpstream = "no healthy upstream"
	bodyUpstreamTimeout   = "upstream request timeout"
	bodyConnectFailure    = "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure"
	bodyReset             = "upstream connect error or disconnect/reset before headers. reset reason: connection termination"
	bodyOverflow          = "upstream connect error or disconnect/reset before headers. reset reason: overflow"
	bodyDurationTimeout   = "downstream duration timeout"
)

// localReply is a response Envoy generates itself with no modify_headers
// of its caller (extproc.LocalReply): a body gets content-type text/plain
// and its content-length, no body neither. The site that knows the
// request turns it into gRPC form for a gRPC request
// (extproc.GRPCLocalReply): the router branch of filterManager.decode for the
// router's replies (direct responses, redirects, no cluster, no healthy
// upstream, timeouts, resets), the connection manager in conn_manager.go for
// its own.
func localReply(status int, body string) *extproc.Response {
	return extproc.LocalReply(status, body, nil)
}
