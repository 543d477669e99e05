// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"debug/buildinfo"
	"fmt"
	"runtime/debug"
)

// gatewayAPIModule is the Gateway API's main module, whose CRDs a suite
// checks against the version it was built with.
const gatewayAPIModule = "sigs.k8s.io/gateway-api"

// SuiteGatewayAPIVersion returns the sigs.k8s.io/gateway-api version the
// suite binary at path was built with, read from its Go build
// information. Both suites check that the installed Gateway API CRDs
// carry exactly that bundle version (the GIE suite v1.6.0 was built
// against v1.6.1, the Gateway API suite against its own release), so the
// harness installs the CRDs of that version, not go.mod's.
func SuiteGatewayAPIVersion(path string) (string, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("suite binary %s: %w", path, err)
	}
	v, err := gatewayAPIVersion(bi)
	if err != nil {
		return "", fmt.Errorf("suite binary %s: %w", path, err)
	}
	return v, nil
}

// gatewayAPIVersion is the version of gatewayAPIModule among bi's modules,
// after its replacement if it has one; an error when it is missing or
// replaced by a folder (no version to download CRDs of).
func gatewayAPIVersion(bi *debug.BuildInfo) (string, error) {
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	for _, m := range mods {
		if m == nil || m.Path != gatewayAPIModule {
			continue
		}
		if r := m.Replace; r != nil {
			if r.Version == "" {
				return "", fmt.Errorf("%s is replaced by the folder %s: no release to take CRDs from", gatewayAPIModule, r.Path)
			}
			return r.Version, nil
		}
		if m.Version == "" || m.Version == "(devel)" {
			return "", fmt.Errorf("%s has no release version (%q)", gatewayAPIModule, m.Version)
		}
		return m.Version, nil
	}
	return "", fmt.Errorf("not built with %s", gatewayAPIModule)
}
