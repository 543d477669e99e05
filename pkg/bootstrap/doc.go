// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package bootstrap builds the Envoy bootstrap (envoy.config.bootstrap.v3.
// Bootstrap) of a Gateway's proxy: the configuration Envoy reads at start
// with -c, before it talks to pilot-discovery.
//
// Input: a Config (the Gateway, the ADS address, TLS and authentication).
// Output: the typed bootstrap proto (Build) or its JSON (JSON), which the
// Gateway controller stores in the bootstrap ConfigMap of each Gateway
// deployment (pilot/pkg/config/kube/gateway, deployment.go).
//
// The bootstrap holds:
//   - node: id and cluster (placeholders; the Deployment overrides the id per
//     pod with --service-node) and the metadata keys GATEWAY_NAMESPACE and
//     GATEWAY_NAME that pilot/pkg/xds maps to the Gateway;
//   - dynamic_resources: LDS and CDS over one ADS stream (api_type GRPC,
//     transport V3, the node sent on the first message only); routes and
//     endpoints follow from them (RDS and EDS also over ADS);
//   - the ADS gRPC service: Envoy's own client over the static cluster
//     "xds-grpc" (HTTP/2, TLS unless Plaintext), or, when a ServiceAccount
//     token is to be sent, the Google gRPC client with TLS channel credentials
//     and the file_based_metadata call credentials, with credentials_factory_name
//     envoy.grpc_credentials.file_based_metadata (Envoy's default factory,
//     used when the name is empty, ignores plugin call credentials and would
//     open the stream without the token);
//   - an admin listener on 127.0.0.1 only, and a status listener whose
//     /healthz/ready forwards to the admin's /ready (the readiness probe);
//   - layered_runtime: one static layer setting re2.max_program_size.
//     error_level to RE2MaxProgramSize (Envoy's default, 100, refuses most
//     user regexes); no admin layer, so the limit cannot drift from the one
//     the translator checks.
//
// Rules callers keep: Build is pure (no I/O, no clock); the token file is
// read by Envoy, never here. Token rotation: the file_based_metadata plugin
// reads the file each time it attaches credentials to a call, which for ADS
// is each new stream. The kubelet rewrites a projected ServiceAccount token
// before it expires, so every reconnect sends a current token.
// pilot-discovery reviews the token the stream opened with again every
// --xds-auth-recheck, so a stream ends soon after that token expires (or its
// ServiceAccount is deleted) and Envoy reconnects with the rotated file. The
// token's audience is set by the Deployment's projection
// (PILOT_GATEWAY_XDS_TOKEN_AUDIENCE), not here: the bootstrap only names
// the file.
//
// # Files
//
//   - bootstrap.go: Config, Build and JSON: node, ADS over the static xds-grpc
//     cluster (or Google gRPC with the token), admin and status listeners, and
//     the runtime layer.
package bootstrap
