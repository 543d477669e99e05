// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package extauthz runs a real external authorization server as a child
// process for a test: Istio's sample ext_authz server
// (istio.io/istio/samples/extauthz/cmd/extauthz at [Version]), which answers
// Envoy's gRPC check API (envoy.service.auth.v3.Authorization, and v2) and
// the plain HTTP check on two ports.
//
// Its one job: start that server inside a network namespace the test made,
// say when it listens, count the decisions it logs, and take it away
// afterwards.
//
// What the server decides (its own rules, which the tests rely on): a request
// whose x-ext-authz header ([CheckHeader]) is "allow" ([AllowValue]) is
// allowed; any other request is denied with 403 and the body
// "denied by ext_authz for not found header `x-ext-authz: allow` in the
// request" ([DenyBody]). (Over gRPC, a request without that header is allowed
// when its source principal ends in /sa/a; a gateway's check request
// carries no source principal, so it is denied.) Both answers carry
// [ResultHeader] ("allowed" or "denied") and [ReceivedHeader], the server's
// rendering of the check request it received (over gRPC the
// AttributeContext, over HTTP the method, host, path, headers and body), and
// a third header, x-ext-authz-additional-header-override. An allowed gRPC
// check returns them as headers to add to the request; an allowed HTTP check
// returns them as its response headers.
//
// Inputs: the binary, found only in $EXTAUTHZ_TEST_BINARIES (the folder
// hack/extauthz-binary.sh builds it into and prints); [Binary] fails the
// test (never skips) when it is missing, naming the script. A [Config]: the
// network namespace (kubeenv.NewNetNS) to run in, the address of that
// namespace the server is reached at, and the gRPC and HTTP ports.
//
// The server binds its ports on every address of its network namespace
// (":port"), so it always runs inside the test's own namespace, never in the
// host's; a test reaches it at Config.IP from the host through the
// namespace's routes, as the Gateway's data plane does through the
// authorization Service's endpoints.
//
// Outputs: a [Server] listening at [Server.GRPCAddr] and [Server.HTTPAddr],
// its combined output kept in memory ([Server.Logs], attached to the test
// output when the test fails) and counted by decision ([Server.Decisions]).
//
// Rules for callers: call Start, Stop and Restart from the test goroutine.
// Start registers a t.Cleanup that stops the process group (SIGTERM, then
// SIGKILL); the kernel kills the child if the test binary dies first.
// Register Start after kubeenv.NewNetNS, so the server stops before the
// namespace is deleted.
//
// # Files
//
//   - binary.go: Version, BinariesEnv and Binary, the server's binary found
//     in $EXTAUTHZ_TEST_BINARIES; the sample's header names and deny body.
//   - server.go: Config, Start and Server: the child process in the
//     namespace, readiness, Stop and Restart.
//   - decisions.go: Decisions, the server's log read line by line and
//     counted by check API and verdict.
package extauthz
