// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package traffic is `make demo-traffic`: the seed's inference request sent
// through the seed Gateway's data plane and answered by the model-server
// pod that the endpoint picker (EPP) chose, with every part real except
// the kubelet and, unless ENVOY_BINARY names one, Envoy.
//
// What runs, on this machine only (Run):
//
//   - a real cluster (pkg/test/kubeenv: etcd, kube-apiserver and
//     kube-controller-manager v1.37.2, with the Deployment and ReplicaSet
//     controllers), the Gateway API, InferencePool, InferenceObjective and
//     DestinationRule CRDs;
//   - examples/seed applied unchanged (server-side apply, pkg/test/kubeapply);
//   - the pods its Deployments create, played by this program as a kubelet
//     would run them, each in a network namespace of its own
//     (kubeenv.NewNetNS) at the seed's address: a vLLM simulator
//     (pkg/test/vllmsim, configured from the pod's own arguments) per
//     model-server pod at 10.244.0.13-15:8000, and the EPP pod at
//     10.244.0.16:9002;
//   - pilot-discovery in process (controller.StartGatewayPilot), which
//     writes the Gateway's bootstrap ConfigMap and serves ADS on loopback;
//   - the EPP the seed's Deployment names: lwepp, built from GIE v1.6.2
//     (pkg/test/epp; the run fails, saying so, if the seed's image is
//     another), serving TLS with its own certificate, as the seed's
//     DestinationRule (SIMPLE, insecureSkipVerify) expects, in the default
//     body mode (FULL_DUPLEX_STREAMED request and response bodies: the
//     GatewayClass pilot-discovery creates has no parameters). The EPP
//     listens on the host's loopback (the API server it watches listens
//     there too); a relay in the EPP pod's namespace makes it reachable at
//     10.244.0.16:9002, through the recording proxy (pkg/test/eppproxy),
//     which reads the pick in each of the EPP's answers;
//   - the Gateway's data plane, booted from that ConfigMap's bootstrap
//     unmodified: the project's Envoy stand-in (pkg/test/dataplane, in
//     process), or real Envoy when ENVOY_BINARY is set (pkg/test/gwproxy),
//     its listener on the host's loopback.
//
// What it prints: each step (the EPP pod's line, EPPLine, names the lwepp
// run and the image the seed names), then for each of the seed's requests the
// status, the pod that answered and the pod the EPP picked (PickLine), then
// one request with the EPP stopped, answered through the FailOpen fallback
// (FallbackLine), and the closing line saying what was stopped.
// CheckOutput checks that shape.
//
// Cleanup: everything is undone, last started first, whether the run
// succeeds, fails or is interrupted (ctx ends: Ctrl-C). Child processes and
// `ip` commands run in process groups of their own, so a Ctrl-C reaches
// only this program, which then stops them in order; the closing line
// lists any network namespace left.
//
// The seed's addresses are shared with tests/integration/pilot/gie: both
// take kubeenv.LockAddresses before making their namespaces.
//
// # Files
//
//   - run.go: Config and Run: the cluster, the seed applied, the pods played,
//     pilot-discovery, the EPP behind the recording proxy, the data plane, the
//     requests and the cleanup in order.
//   - pods.go: a simulator's configuration read from a model-server pod's
//     arguments, and the checks and cleanup of network namespaces.
//   - runner.go: runner, a testing.TB for the test harnesses outside a test.
//   - output.go: Result, the printed lines (EPPLine, PickLine, FallbackLine) and
//     CheckOutput, the check of the output's shape.
package traffic
