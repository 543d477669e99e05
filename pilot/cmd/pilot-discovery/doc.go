// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Command pilot-discovery is infermesh's control plane: it watches Gateway API
// and Gateway API Inference Extension objects and serves Envoy configuration
// over ADS to each Gateway's proxies.
//
// Commands:
//
//   - discovery: the control plane (bootstrap.Server) over a cluster, or over
//     a folder of manifests with -f (file mode); ADS over TLS with optional
//     proxy authorization (a token of the Gateway's own ServiceAccount for our
//     audience; without it a warning at start that any client reads every
//     Gateway's keys); the debug endpoints on loopback, for loopback Host
//     names only, unless told otherwise.
//   - proxy-config: a Gateway's Envoy configuration as istioctl-like tables or
//     Envoy JSON/YAML, fetched over ADS from a running server, or with -f from
//     the same pipeline run in process over manifests.
//   - proxy-status: /debug/syncz as a table.
//   - status and check: the controller run offline over manifests, printing
//     what it would write, or every problem with exit status 1; what breaks
//     traffic but no status can say (a parentRef to nothing, a pool that
//     selects no pod, an expired listener certificate) is read from the
//     inputs.
//   - version (and --version); completion (cobra's).
//
// Every command takes --log-format and --log-level (one process-wide
// forwarding handler behind slog and klog, set once); -f takes files,
// folders and stdin; errors from a transport mismatch or a timeout carry a
// hint naming the fix.
//
// Everything printed escapes what it quotes: tables, check's lines, the
// manifest problems of status and proxy-config, and main's error line. Node
// ids, NACK messages, file and object names come from proxies and users, and
// reach the operator's terminal only as printable text.
//
// # Files
//
// The command tree and what every command shares:
//
//   - main.go: main, which runs the root command.
//   - root.go: the root command with its subcommands, and app, what they share
//     (surroundings, logger).
//   - logging.go: --log-level and --log-format, and the one slog handler behind
//     slog's default logger and klog.
//   - escape.go: escapeCell, which keeps only printable text in what the tables
//     print.
//   - hints.go: the default ports, and the hints added to connection and
//     timeout errors.
//
// discovery:
//
//   - discovery.go: the discovery command: its flags, their validation, and
//     runDiscovery, the control plane until a signal.
//   - kubeconfig.go: where the cluster configuration comes from (--kubeconfig,
//     in-cluster, $KUBECONFIG) and the client built from it.
//   - tls.go: the ADS server's TLS with certificate reload, and the clients'
//     transport credentials towards ADS.
//   - xdsauth.go: --xds-auth: each ADS stream authorized for one Gateway by a
//     token of that Gateway's own ServiceAccount for our audience, reviewed
//     when the stream opens and again every --xds-auth-recheck.
//   - debugaddr.go: --debug-address: the debug listener, on loopback by
//     default, with a warning when bound elsewhere.
//   - startmemory.go: the Go soft memory limit during start-up, raised with the
//     live heap and lifted once the first configuration is published.
//   - profile.go: --profile-cpu, a CPU profile of the whole run.
//   - problemlog.go: in file mode, the problems check -f would print, logged
//     as they come and go once the controller has caught up with a change.
//   - files.go: openFiles for discovery -f, and fileSource, proxy-config's -f
//     source: startInProcess runs discovery -f's whole pipeline with ADS on an
//     in-memory listener, asked over ADS as a running server is.
//
// proxy-config and proxy-status:
//
//   - proxyconfig.go: the proxy-config command: resource kinds and their names,
//     filters, output as tables, JSON or YAML.
//   - source.go: configSource, and adsSource, which fetches a Gateway's
//     resources over one delta ADS stream as its Envoy would.
//   - tables.go: the proxy-config tables of clusters, endpoints, listeners,
//     routes and secrets, in istioctl's columns.
//   - proxystatus.go: the proxy-status command: /debug/syncz as a table, with
//     refused parts and NACKs.
//
// status and check (offline):
//
//   - offline.go: what status and check share: the flags, and runOffline, the
//     controller's outputs over manifests (bootstrap.FileController, the
//     controller discovery -f runs).
//   - manifests.go: -f PATH (folders, files, stdin) staged into one folder for
//     the file source, with problems named as the user gave the paths.
//   - status.go: the status command: the status the controller would write, as
//     YAML documents.
//   - check.go: the check command: every problem in the controller's outputs,
//     one per line, with exit status 1 when there is any.
//   - checkinputs.go: what breaks traffic but no status can say, read from
//     the inputs: parentRefs to nothing, pools that select no pod, expired
//     listener certificates; another class's Gateways as notes.
//   - podtemplates.go: the pod templates of workloads (Deployments,
//     StatefulSets, ...) read from the manifests, so a pool's selector can be
//     matched against pods a cluster would run.
package main
