// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package features holds pilot-discovery's feature flags: typed values read
// from the environment through one table that lists every flag with its
// default and description (for --help and the /debug/features endpoint).
//
// The names and defaults are istiod's, so manifests written for Istio (the
// seed sets ENABLE_GATEWAY_API_INFERENCE_EXTENSION and
// SUPPORT_GATEWAY_API_INFERENCE_EXTENSION) work unchanged. One consequence:
// with the default controller name, infermesh and an istiod must never run
// against the same cluster; both would claim the same GatewayClasses and write
// the same status entries. Set PILOT_GATEWAY_API_CONTROLLER_NAME (and the
// default class name) to something else to run beside Istio.
//
// # Files
//
//   - features.go: Features, the table of every flag with its default, Load,
//     Usage and the /debug/features handler.
//   - validate.go: the value checks the flags share: controller name, cluster
//     domain, object name, image reference, HOST:PORT.
package features
