// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package upstreamtls decides the client TLS of every upstream a Gateway's
// proxy connects to: a Service port a route sends or mirrors to, and an
// InferencePool's Endpoint Picker, which is a Service port too. It is the
// one place that reads Gateway API BackendTLSPolicies and Istio
// DestinationRules for TLS; the controller (pilot/pkg/config/kube/gateway)
// wires it into krt and puts the result in the model (model.EPPTLS on
// ServiceBackend, EPPBackend and Rule.Mirrors), and nothing else resolves
// upstream TLS.
//
// One precedence rule for every Service port (Resolve): the
// BackendTLSPolicies naming the port (targetRefs[].sectionName) if any,
// else those naming the Service as a whole, the oldest winning
// (creationTimestamp, then namespace/name); only without any, the
// DestinationRules for the Service's host, one in the Service's namespace
// first, then the oldest. A BackendTLSPolicy wins over a DestinationRule
// even when it is invalid: a broken policy never falls back to a weaker
// rule.
//
// It fails closed: a setting whose CA is missing, of the wrong kind, or not
// a certificate crypto/x509 parses (CA bundles are refused block by block,
// core.ParseCABundle) gives a Problem instead of TLS, and the controller turns a
// Problem into an invalid backend (HTTP 500, a status condition), never
// into plaintext or the system trust store. The system trust store is used
// only when asked for: wellKnownCACertificates System, or a DestinationRule
// in SIMPLE mode naming no CA at all.
//
// Everything here is a pure function of its arguments, except that
// ResolvePolicy's and ResolveRule's callers log what they find invalid.
//
// # Files
//
//   - policy.go: a BackendTLSPolicy resolved (ResolvePolicy, Policy): its
//     targets, its TLS, and its Accepted and ResolvedRefs reasons.
//   - rule.go: a DestinationRule resolved (ResolveRule, Rule), and the host
//     it names (DestinationRuleHost).
//   - resolve.go: the precedence rule (Resolve, WinningPolicy) and a
//     credentialName's CA read in a Gateway's namespace (CredentialCA).
package upstreamtls
