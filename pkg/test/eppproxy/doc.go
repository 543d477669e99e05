// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package eppproxy is a recording gRPC proxy that sits between a data plane
// and a GIE Endpoint Picker (EPP). It serves
// envoy.service.ext_proc.v3.ExternalProcessor/Process, forwards every
// stream message by message to the upstream EPP (plaintext, or TLS with
// ALPN h2), passes back the EPP's messages and its final status unchanged,
// and records per stream: the request headers the data plane sent (so a test
// correlates by a header such as x-test-request-id), the endpoint the EPP
// picked (envoy.lb / x-gateway-destination-endpoint dynamic metadata, and the
// request header of that name), any immediate response, and the served
// endpoint the data plane reports back in the response phase's
// metadata_context.
//
// It can serve TLS itself with a throwaway self-signed certificate (ALPN
// h2), as a DestinationRule with TLS mode SIMPLE expects of the EPP.
//
// Callers: Start, point the data plane at Addr, read Records or Record, and
// Close. Everything listens on 127.0.0.1 only.
//
// # Files
//
//   - proxy.go: Config, Start and Proxy: each Process stream forwarded message
//     by message, and what it carried recorded (Record).
//   - tls.go: SelfSigned, the throwaway certificate the proxy serves and the
//     client config that trusts it.
package eppproxy
