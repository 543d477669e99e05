// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package dataplanetest holds the helpers that the test data plane's own
// tests (package dataplane) and the end-to-end tests driving it
// (tests/e2e) share: the seed Gateway's bootstrap, loopback backends that
// echo what they received, and requests to a listener. It does not import
// the data plane, so the data plane's internal tests can use it.
//
// # Files
//
//   - dataplanetest.go: Bootstrap, Backend and BackendHandler, Get and
//     BodyOf (Listeners is the data plane's Addr), EditAny.
package dataplanetest
