// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package seed holds the objects of the seed scenario for tests: the
// InferencePool and the Endpoint Picker's Service of the first seed document,
// its HTTPRoute, and the Gateway and GatewayClass the seed names without
// showing their manifests, so that every test of "the
// seed's pool" uses the same objects. examples/seed holds the same scenario
// as manifests, and pilot/test/seedmodel as the model the controller derives.
//
// # Files
//
//   - seed.go: the seed's names and request, and each of its objects as a fresh
//     copy (InferencePool, GatewayClass, Gateway, HTTPRoute, the EPP's
//     Service).
//   - create.go: Create, the seed's objects created in order through an API
//     server.
package seed
