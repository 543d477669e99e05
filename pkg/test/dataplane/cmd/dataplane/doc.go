// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Command dataplane runs the test data plane (package
// github.com/infermesh/infermesh/pkg/test/dataplane) as a process that starts
// as Envoy does, so a Gateway's Deployment can run it as its container's
// entrypoint: hack/images.sh maps the Gateway data-plane image to it when
// pods run as local processes.
//
// Its one job: read the bootstrap file Envoy would read and serve the xDS it
// receives until SIGTERM or SIGINT.
//
// Command line: the Envoy flags our Gateway Deployment passes
// (pilot/pkg/config/kube/gateway/deployment.go), with Envoy's spelling
// (source/server/options_impl.cc, TCLAP: a flag and its value are separate
// arguments):
//
//	-c, --config-path FILE   the bootstrap (JSON, as pkg/bootstrap writes it)
//	--service-node ID        replaces the bootstrap node's id, as Envoy does
//
// Any other flag Envoy knows (--concurrency, --log-level, --config-yaml,
// --service-cluster, ...) is refused with an error naming it, since the data
// plane does not implement it, and so is any flag Envoy does not know, a
// positional argument, a repeated flag and the --flag=value form (stricter
// than TCLAP where unsure). A FILE ending in .yaml, .yml, .pb or .pb_text
// (formats Envoy chooses by that extension) is refused: only JSON is read.
//
// Behaviour: every xDS listener is bound at the address and port of its
// socket_address (dataplane.Options.BindListenerAddresses), as Envoy binds
// it; logs go to stderr. SIGTERM or SIGINT stops it: listeners and the ADS
// stream are closed and it exits 0. A bad command line or bootstrap exits 1
// with the error on stderr.
//
// The bootstrap's admin listens from the start (only /ready is
// implemented) and its static listeners (the status port) accept
// connections once the server is initialized, as Envoy's do: so the
// Gateway Deployment's readiness probe, GET /healthz/ready on the status
// port, is refused before the first CDS and LDS are in and warmed, and
// answers 200 "LIVE" after.
//
// Where it differs from Envoy: everything the package's doc.go lists;
// SIGTERM closes at once, without Envoy's drain.
//
// # Files
//
//   - main.go: main and run: the bootstrap read, the data plane started, and
//     the stop on SIGTERM or SIGINT.
//   - flags.go: the Envoy flags the command takes, and the refusal of every
//     other argument.
package main
