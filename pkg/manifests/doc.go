// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package manifests renders the infermesh Helm chart
// (manifests/charts/infermesh) with Helm's own template engine and values
// handling (helm.sh/helm/v4), so the flat YAML of manifests/ and a `helm
// install` come from one source.
//
// Inputs: the chart folder and values. [Render] validates the values against
// the chart's values.schema.json, as helm install does, and renders every
// template; [Generate] renders the files of manifests/ (the chart's defaults,
// release namespace infermesh-system, createNamespace=true), each with a
// header naming its template.
//
// Outputs: one [File] per template that renders to something, named as the
// template (templates/20-deployment.yaml becomes 20-deployment.yaml), in name
// order, which is the order `kubectl apply -f manifests/` applies them in.
//
// Rules: `make manifests` writes manifests/*.yaml from [Generate] (the test
// TestManifestsMatchChart with -update), and that test fails when they
// differ, so edit the chart, never the rendered files. tests/integration/helm
// checks that the real helm binary installs the same objects.
//
// # Files
//
//   - render.go: Options, File, Render (the chart rendered as helm install
//     would) and Generate (the files of manifests/).
package manifests
