// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package bbr runs GIE's body-based router (BBR) as a child process for a
// test: sigs.k8s.io/gateway-api-inference-extension cmd/bbr at v1.0.0, the
// release our full EPP comes from, built by hack/bbr-binaries.sh.
//
// What BBR does (its pkg/bbr/handlers): an Envoy ext_proc server that reads
// the request body's JSON "model" field and answers with a header mutation
// setting X-Gateway-Model-Name to it and clear_route_cache, so the route is
// picked again on that header. With --streaming (Envoy's
// FULL_DUPLEX_STREAMED request body, the only body mode an infermesh.io
// ExternalProcessor offers) it holds its answer to the request headers
// until the whole body arrived, then sends the headers answer and the body
// back unchanged; a body without a model gets an empty headers answer; a
// body that is not JSON ends the stream with an error. Without --streaming
// it expects Envoy's BUFFERED body mode, which we never configure, so
// Start always passes --streaming.
//
// v1.0.0 serves ext_proc over TLS only, with a self-signed certificate it
// makes at each start (runserver's SecureServing is always true): a
// Gateway reaches it through a DestinationRule (SIMPLE, insecureSkipVerify)
// on its Service, as GIE's own BBR chart does for Istio.
//
// It also needs a cluster: the binary is a controller-runtime manager and
// reads its REST config through ctrl.GetConfig (here $KUBECONFIG), though
// it watches nothing; its metrics endpoint authenticates against that API
// server.
//
// Inputs: the binary, found only in $BBR_TEST_BINARIES (the folder
// hack/bbr-binaries.sh prints); [Binary] fails the test (never skips) when
// it is missing, naming the script. A [Config]: the kubeconfig file.
//
// Outputs: a [Process] whose ext_proc server listens on 127.0.0.1 at
// [Process.Addr] (its three ports, ext_proc, gRPC health and metrics, are
// chosen free at Start and kept across Restart; BBR binds them on every
// host address), its output kept in memory ([Process.Logs], attached to the
// test output when the test fails). A test puts it behind a pod address
// with kubeenv.NetNS.Relay, as the EPPs are.
//
// Rules for callers: call Start, Stop and Restart from the test goroutine.
// Start registers a t.Cleanup that stops the process group (SIGTERM, then
// SIGKILL); the kernel kills the child if the test binary dies first.
//
// # Files
//
//   - process.go: BinariesEnv, Binary, Config, Start and Process: the child
//     process, readiness (a TLS handshake on its ext_proc port), Stop and
//     Restart.
package bbr
