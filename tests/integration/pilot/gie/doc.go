// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package gie is the end-to-end suite of the Gateway API Inference Extension:
// a real cluster (pkg/test/kubeenv), the whole pilot-discovery in process
// (pilot/pkg/bootstrap), real endpoint pickers (pkg/test/epp) behind a
// recording proxy (pkg/test/eppproxy), model-server simulators
// (pkg/test/vllmsim) on pod addresses in a network namespace, a real
// authorization server where a test needs one (pkg/test/extauthz), GIE's
// body-based router where one routes by model (pkg/test/bbr), and a Gateway
// proxy booted from the bootstrap ConfigMap pilot-discovery writes: the test
// data plane (pkg/test/dataplane), or real Envoy when $ENVOY_BINARY is set.
//
// harness_test.go builds one such world per test (newHarness); each scenario
// is its own Test function. README.md says how to run one alone.
package gie
