// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package harness runs the Gateway API Inference Extension conformance suite
// (sigs.k8s.io/gateway-api-inference-extension/conformance, its own compiled
// test binary, unmodified) against infermesh on one machine: `make
// conformance` (hack/conformance.sh) runs TestGIEConformance, which is
// behind the build tag "conformance" so that neither `make test` nor `make
// integ` runs it. `make conformance-gateway-api` runs the Gateway API suite
// (sigs.k8s.io/gateway-api/conformance v1.7.0, profiles GATEWAY-HTTP and
// GATEWAY-GRPC) the same way: TestGatewayAPIConformance, on a cluster of
// its own ranges with the experimental-channel CRDs (clusterSpec), its
// verdicts counted by profile (profiles.go).
//
// What the test sets up, in order (conformance/README.md has the why):
//
//   - a control plane from pkg/test/kubeenv: etcd, kube-apiserver,
//     kube-controller-manager (the deployment, replicaset, endpointslice,
//     serviceaccount, garbage-collector, namespace and node-lifecycle
//     controllers) and kube-scheduler, with the Gateway API CRDs of the
//     release the suite binary was built with (suitebuild.go: the suites
//     refuse any other bundle version) and the InferencePool CRD, from the
//     modules' own manifests, which carry the bundle-version annotations the
//     suite checks;
//   - one node agent (pkg/test/node) whose pods run as local processes, with
//     the image map hack/images.sh writes (images_test.go);
//   - a load-balancer stand-in (loadbalancer_test.go) that gives each Service
//     of type LoadBalancer an address on the host and forwards its ports to the
//     Service's ready endpoints, as cloud-provider-kind does;
//   - infermesh installed from manifests/ (install_test.go) and the GatewayClass
//     the suite names, with its parameters ConfigMap (gatewayclass_test.go);
//   - the suite binary (suite_test.go), whose report YAML and summary line it
//     writes where hack/conformance.sh asks; each test is judged by Go's
//     verdict line in the suite's output (verdicts.go, profiles.go), the
//     report only cross-checked.
//
// It needs root (network namespaces, a bridge), like tests/integration/node.
//
// # Files
//
//   - profiles.go: the Gateway API suite's tests and profiles (ReadTestList),
//     verdicts sorted by profile part, and the cross-check with the suite's
//     report.
//   - suitebuild.go: the Gateway API version a suite binary was built with,
//     read from its build information, so the harness installs that
//     version's CRDs.
//   - verdicts.go: Go's verdict lines read from the suite's output, counted,
//     and checked against the report's totals.
package harness
