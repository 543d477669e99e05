// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package certs makes throwaway TLS certificates for tests.
//
// # Files
//
//   - certs.go: SelfSigned, SelfSignedFor and SelfSignedClient: PEM ECDSA P-256
//     certificates and keys valid for a day; CertPEM and NotACertificatePEM
//     for tests of CA bundles.
package certs
