// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// KubernetesVersion is the Kubernetes release whose binaries the tests run. It
// must match K8S_VERSION's default in hack/k8s-test-binaries.sh.
const KubernetesVersion = "v1.37.2"

// BinariesEnv names the environment variable that, when set, points at a folder
// holding kube-apiserver, kube-controller-manager and etcd (and kube-scheduler
// for WithScheduler). It overrides the cache folder of hack/k8s-test-binaries.sh.
const BinariesEnv = "KUBE_TEST_BINARIES"

// binaryNames are the executables every Start needs, all in one folder.
var binaryNames = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// schedulerBinary is the executable Start needs too with WithScheduler.
const schedulerBinary = "kube-scheduler"

// errNoBinaries is wrapped by findBinaries when a binary is missing.
var errNoBinaries = errors.New("kubeenv: Kubernetes test binaries not found; build them with hack/k8s-test-binaries.sh (or `make integ`), or point " + BinariesEnv + " at a folder holding " + "etcd, kube-apiserver and kube-controller-manager (and kube-scheduler for WithScheduler)")

// defaultBinaryDir is where hack/k8s-test-binaries.sh puts the binaries:
// ${INFERMESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infermesh}/k8s/<version>/bin.
func defaultBinaryDir(getenv func(string) string) string {
	root := getenv("INFERMESH_CACHE")
	if root == "" {
		cache := getenv("XDG_CACHE_HOME")
		if cache == "" {
			cache = filepath.Join(getenv("HOME"), ".cache")
		}
		root = filepath.Join(cache, "infermesh")
	}
	return filepath.Join(root, "k8s", KubernetesVersion, "bin")
}

// findBinaries returns the folder holding every binary in names: dir if not
// empty, else $KUBE_TEST_BINARIES, else the script's cache folder. The error
// wraps errNoBinaries and names the folder searched and the missing binary.
func findBinaries(dir string, names []string, getenv func(string) string) (string, error) {
	if dir == "" {
		dir = getenv(BinariesEnv)
	}
	if dir == "" {
		dir = defaultBinaryDir(getenv)
	}
	for _, name := range names {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", errNoBinaries, name, err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w: %s is not an executable file", errNoBinaries, p)
		}
	}
	return dir, nil
}
