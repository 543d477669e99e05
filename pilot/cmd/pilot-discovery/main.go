// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Command pilot-discovery is infermesh's control plane: it watches Gateway API
// and Gateway API Inference Extension objects and serves Envoy configuration
// over ADS to each Gateway's proxies.
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
