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
//     (xdsauth.go), JSON logs (logging.go), cluster configuration lookup
//     (kubeconfig.go).
//   - proxy-config (proxyconfig.go): a Gateway's Envoy configuration as tables
//     (tables.go) or Envoy JSON/YAML, from a configSource (source.go: over ADS
//     today; the seam for a file-backed source).
//   - proxy-status (proxystatus.go): /debug/syncz as a table.
//
// Every table escapes what it prints (escape.go): node ids, NACK messages
// and names come from proxies and users, and reach the operator's terminal
// only as printable text.
//   - version.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
