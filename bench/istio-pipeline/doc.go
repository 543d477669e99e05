// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package pipeline races infermesh's whole control plane against Istio's,
// in one process, on the same generated cluster (`make bench-istio`,
// hack/bench-istio.sh; architecture/istio-comparison.md has the figures).
//
// This is its own Go module: it requires istio.io/istio at the version
// bench/istio and `make bench-compare` use, and infermesh through a
// replace of the repository root, so that infermesh's module never depends
// on Istio. One build holds one version of each module, and infermesh needs
// newer Gateway API types than that Istio; hack/istio-src.sh makes the copy
// of Istio this module builds (one line adapted, never committed).
//
// The inputs are hack/gen-pools.sh's folder (N InferencePools of 10 pods,
// one HTTPRoute each, over one or ten Gateways, the EPP's Service and
// DestinationRule) with what the cluster's controllers add: the
// GatewayClass, the shadow Services and the EndpointSlices. Each side gets
// them in its own fake API client; each side's proxies are delta ADS
// streams that follow Envoy's flow, one per Gateway, with the node
// metadata each control plane maps to that Gateway.
//
// Files:
//   - doc.go: this overview.
//   - inputs.go: Generate and Load (the generated folder, decoded, and the
//     cluster-side objects), Inputs and Pool.
//   - sides.go: Side and Instance, what the harness needs of a control
//     plane; Sides.
//   - istio.go: IstioSide, Istio's FakeDiscoveryServer over Istio's fake
//     kube client, and the test.Failer it takes.
//   - ours.go: OurSide, pilot-discovery's bootstrap.Server in cluster mode
//     over kube.NewFake.
//   - adsclient.go: the delta ADS client that stands for a Gateway's Envoy.
//   - run.go: Run (Prepare, Cold, Settle, RouteChange, EndpointChange),
//     the completeness check, LiveHeap.
//   - fairness.go: GatewayView, the reduction of what a proxy holds to
//     what both sides must agree on, and CompareViews.
//   - fairness_test.go: TestFairness (100 pools, one and ten Gateways) and
//     TestFairnessCatchesDroppedEPP (the check fails on a dropped EPP).
//   - bench_test.go: BenchmarkPipeline (cold, route, endpoint per side).
//   - profile_test.go: PIPELINE_PROFILE, each side's CPU profile per row
//     and heap profile after settling.
//   - cmd/sidebyside: the table of medians, ratios and goals.
package pipeline
