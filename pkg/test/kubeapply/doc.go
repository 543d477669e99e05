// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package kubeapply server-side applies YAML manifests to a cluster, as
// `kubectl apply --server-side --force-conflicts` does, for harnesses that
// install real manifest folders (the conformance harness's manifests/, the
// traffic demo's examples/seed).
//
// # Files
//
//   - apply.go: Applier, with ApplyDir and Apply of YAML documents under one
//     field manager.
package kubeapply
