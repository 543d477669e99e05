// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

// fieldManager is the harness's server-side apply identity
// (pkg/test/kubeapply), as kubectl's is "kubectl".
const fieldManager = "infermesh-conformance"
