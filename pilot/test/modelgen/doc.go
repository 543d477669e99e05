// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package modelgen generates a random Gateway model and random changes to
// it, the way the controller would produce them: each change (a route, a
// pool, a Service, an Endpoint Picker's TLS, endpoints, a listener)
// replaces only the model values it affects, so unchanged routes keep
// their pointers, as the controller's Translator collection hands them on
// (routeModel); after Rebuild they get new pointers to the same inner
// values, as TranslatorGateway builds them. The
// translator's and the push path's property tests compare incremental
// output with a from-scratch translation after every step.
//
// # Files
//
//   - modelgen.go: World: the random Gateway model, Step (one random change),
//     Rebuild, and the current model, EPP TLS and endpoints.
package modelgen
