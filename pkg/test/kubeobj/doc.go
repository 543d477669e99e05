// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package kubeobj is the integration tests' way to install YAML the way a
// user does and to compare what ended up in the cluster: it reads the YAML
// files of a folder such as manifests/ in install order ([Files], [Read]),
// server-side applies them as `kubectl apply --server-side` does ([Applier]),
// reads the live objects back ([Applier.Live]) and compares two sets of live
// objects field by field with go-cmp, leaving out what the API server sets
// on its own ([Diff]).
//
// Inputs: files, or objects, and a REST config of a test cluster
// (pkg/test/kubeenv). Outputs: parsed objects, live objects, a diff.
//
// Rules for callers: objects of namespaced kinds must name their namespace
// (as manifests/ does); Apply fails on the first object the API server
// refuses, naming it, with strict field validation (an unknown or duplicate
// field is an error).
//
// # Files
//
//   - read.go: Files, Read and Parse: YAML files in install order, parsed into
//     objects.
//   - apply.go: Applier (server-side apply with strict field validation, and
//     Live) and ApplyDir.
//   - compare.go: Comparable and Diff: live objects compared without what the
//     API server sets.
package kubeobj
