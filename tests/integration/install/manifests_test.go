// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package install_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/infermesh/infermesh/pkg/test/kubeobj"
)

// manifestsDir is the repository's manifests folder, from this package's
// folder (go test runs a package in its own folder).
const manifestsDir = "../../../manifests"

// applyManifests applies manifests/ as shipped, as `kubectl apply
// --server-side -f manifests/` does, with strict field validation (an unknown
// or duplicate field fails the test), as the admin user, and returns the
// objects as parsed.
func applyManifests(t *testing.T, cfg *rest.Config) []*unstructured.Unstructured {
	t.Helper()
	return kubeobj.ApplyDir(t, cfg, manifestsDir)
}
