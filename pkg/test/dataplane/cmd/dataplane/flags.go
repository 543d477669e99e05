// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// args are the Envoy command-line options the data plane implements.
type args struct {
	configPath  string // -c, --config-path
	serviceNode string // --service-node
}

// envoyFlags are the other flags Envoy's command line knows
// (source/server/options_impl.cc), refused as not implemented rather than
// as unknown, so the message says which.
var envoyFlags = map[string]bool{
	"--base-id": true, "--use-dynamic-base-id": true, "--base-id-path": true, "--concurrency": true,
	"--config-yaml": true, "--allow-unknown-static-fields": true, "--reject-unknown-dynamic-fields": true,
	"--ignore-unknown-dynamic-fields": true, "--skip-deprecated-logs": true, "--admin-address-path": true,
	"--local-address-ip-version": true, "-l": true, "--log-level": true, "--component-log-level": true,
	"--log-format": true, "--log-format-escaped": true, "--log-path": true, "--restart-epoch": true,
	"--hot-restart-version": true, "--service-cluster": true, "--service-zone": true,
	"--file-flush-interval-msec": true, "--file-flush-min-size-kb": true, "--drain-time-s": true,
	"--drain-strategy": true, "--parent-shutdown-time-s": true, "--mode": true, "--disable-hot-restart": true,
	"--enable-mutex-tracing": true, "--cpuset-threads": true, "--disable-extensions": true,
	"--enable-fine-grain-logging": true, "--socket-path": true, "--socket-mode": true,
	"--enable-core-dump": true, "--stats-tag": true, "--skip-hot-restart-on-no-parent": true,
	"--skip-hot-restart-parent-stats": true, "--version": true, "-h": true, "--help": true,
}

// notJSON are the bootstrap file extensions for which Envoy reads another
// format than JSON (MessageUtil::loadFromFile, source/common/protobuf/utility.cc).
var notJSON = []string{".yaml", ".yml", ".pb", ".pb_text"}

// parseArgs reads the command line (without the program name).
func parseArgs(argv []string) (args, error) {
	var a args
	seen := map[string]bool{}
	for i := 0; i < len(argv); i++ {
		flag := argv[i]
		var dst *string
		canonical := flag
		switch flag {
		case "-c", "--config-path":
			dst, canonical = &a.configPath, "--config-path"
		case "--service-node":
			dst = &a.serviceNode
		default:
			return args{}, refuse(flag)
		}
		if seen[canonical] {
			return args{}, fmt.Errorf("%s given more than once", flag)
		}
		seen[canonical] = true
		if i+1 >= len(argv) {
			return args{}, fmt.Errorf("%s needs a value", flag)
		}
		i++
		*dst = argv[i]
	}
	if a.configPath == "" {
		return args{}, errors.New("-c/--config-path is required (the data plane reads its bootstrap from a file)")
	}
	if ext := strings.ToLower(filepath.Ext(a.configPath)); slices.Contains(notJSON, ext) {
		return args{}, fmt.Errorf("--config-path %s: only a JSON bootstrap is implemented, Envoy would read this file as %s", a.configPath, ext)
	}
	return a, nil
}

// refuse is the error for an argument the data plane does not take.
func refuse(arg string) error {
	name, _, hasValue := strings.Cut(arg, "=")
	switch {
	case hasValue && (name == "-c" || name == "--config-path" || name == "--service-node"):
		return fmt.Errorf("%q: give the flag and its value as two arguments, as Envoy's command line does", arg)
	case envoyFlags[name]:
		return fmt.Errorf("the Envoy flag %s is not implemented by the test data plane (it takes -c/--config-path and --service-node)", name)
	case strings.HasPrefix(arg, "-"):
		return fmt.Errorf("unknown flag %s (Envoy has no such flag; the test data plane takes -c/--config-path and --service-node)", name)
	}
	return fmt.Errorf("unexpected argument %q (Envoy takes no positional arguments)", arg)
}
