// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package version

import "runtime/debug"

// Version is the release or git description of this build; "dev" when
// neither the linker nor the toolchain's build information names one.
var Version = "dev"

func init() {
	if Version != "dev" {
		return
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		Version = fromBuildInfo(bi)
	}
}

// fromBuildInfo is the main module's version when it has one ("(devel)"
// is a build in a checkout), else the VCS revision (12 digits, "-dirty"
// with uncommitted changes), else "dev".
func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return rev + dirty
}
