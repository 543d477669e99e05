// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package gateway is the Gateway API and Gateway API Inference Extension
// controller: from Gateways, routes and InferencePools (krt collections) it
// derives route attachment, each pool's gatewayParents, the pool's shadow
// Service and status, and what the xDS translator needs per Gateway.
//
// This file set starts with the shadow Service (shadowservice.go): its name,
// labels and shape are fixed by what Istio does, so tooling written for
// Istio's shadow Services finds ours.
package gateway
