// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ipTool runs iproute2's ip command, as pkg/test/kubeenv's NewNetNS does.
type ipTool struct{ path string }

// findIPTool returns the ip command of iproute2, looking in PATH and then in
// the sbin folders, which a non-login PATH may lack.
func findIPTool() (ipTool, error) {
	if p, err := exec.LookPath("ip"); err == nil {
		return ipTool{path: p}, nil
	}
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return ipTool{path: p}, nil
		}
	}
	return ipTool{}, errors.New("node: the ip command of iproute2 is in neither PATH nor /usr/sbin or /sbin (Debian: apt-get install -y iproute2)")
}

// run runs ip with args and returns an error holding its output.
func (t ipTool) run(args ...string) error {
	cmd := exec.Command(t.path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("node: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// runAll runs each step in turn and stops at the first error.
func (t ipTool) runAll(steps [][]string) error {
	for _, s := range steps {
		if err := t.run(s...); err != nil {
			return err
		}
	}
	return nil
}

// linkExists reports whether the root namespace has a link named name.
func (t ipTool) linkExists(name string) bool {
	return exec.Command(t.path, "link", "show", "dev", name).Run() == nil
}
