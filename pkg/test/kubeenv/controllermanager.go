// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"path/filepath"
	"strings"
)

// newControllerManager is kube-controller-manager running only the given
// controllers, without leader election and without its own HTTPS port, then
// the flags of WithControllerManagerArgs.
func newControllerManager(bin string, f files, controllers, extra []string) *process {
	return &process{
		name:    "kube-controller-manager",
		path:    filepath.Join(bin, "kube-controller-manager"),
		logPath: filepath.Join(f.logs, "kube-controller-manager.log"),
		args: append([]string{
			"--kubeconfig=" + f.kcmConfig,
			"--leader-elect=false",
			"--secure-port=0",
			"--controllers=" + strings.Join(controllers, ","),
		}, extra...),
	}
}
