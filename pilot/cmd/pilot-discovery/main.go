// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Command pilot-discovery is infermesh's control plane: it watches Gateway API
// and Gateway API Inference Extension objects and serves Envoy configuration
// over ADS to each Gateway's proxies.
//
// Commands, one file each:
//
//   - discovery (discovery.go): the control plane over a cluster (bootstrap.Server),
//     ADS over TLS (tls.go) with optional ServiceAccount token authentication
//     (xdsauth.go), cluster configuration lookup
//     (kubeconfig.go); in file mode, check's problems logged as they come
//     and go (problemlog.go).
//   - proxy-config (proxyconfig.go): a Gateway's Envoy configuration as tables
//     (tables.go) or Envoy JSON/YAML, from a configSource (source.go: over ADS
//     today; the seam for a file-backed source).
//   - proxy-status (proxystatus.go): /debug/syncz as a table.
//   - status and check (status.go, check.go): the controller run offline over
//     manifests (offline.go, shared), printing what it would write, or every
//     problem with exit status 1; what breaks traffic but no status can say
//     (a parentRef to nothing, a pool that selects no pod, an expired
//     listener certificate) is read from the inputs (checkinputs.go, with
//     the workloads' pod templates from podtemplates.go).
//   - version (and --version); completion (cobra's).
//
// Every command takes --log-format and --log-level (root.go, logging.go:
// one process-wide forwarding handler behind slog and klog, set once); -f
// takes files, folders and stdin (manifests.go); errors from a transport
// mismatch or a timeout carry a hint naming the fix (hints.go).
//
// Everything printed escapes what it quotes (escape.go): tables, check's
// lines, the manifest problems of status and proxy-config, and main's error
// line. Node ids, NACK messages, file and object names come from proxies
// and users, and reach the operator's terminal only as printable text.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error: "+errorText(err))
		os.Exit(1)
	}
}
