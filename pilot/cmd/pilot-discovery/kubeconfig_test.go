// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func touch(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestResolveClusterSourceOrder: --kubeconfig, then in-cluster, then
// $KUBECONFIG (first existing entry), then ~/.kube/config.
func TestResolveClusterSourceOrder(t *testing.T) {
	dir := t.TempDir()
	flag := touch(t, filepath.Join(dir, "flag"))
	env2 := touch(t, filepath.Join(dir, "env2"))
	home := t.TempDir()
	homeCfg := touch(t, filepath.Join(home, ".kube", "config"))
	envList := filepath.Join(dir, "missing") + string(filepath.ListSeparator) + env2
	cases := []struct {
		name string
		flag string
		env  []string
		home string
		want clusterSource
	}{
		{"flag wins over in-cluster", flag, []string{"KUBERNETES_SERVICE_HOST", "10.0.0.1", "KUBECONFIG", env2}, home, clusterSource{Kubeconfig: flag}},
		{"in-cluster over $KUBECONFIG", "", []string{"KUBERNETES_SERVICE_HOST", "10.0.0.1", "KUBECONFIG", env2}, home, clusterSource{InCluster: true}},
		{"$KUBECONFIG first existing", "", []string{"KUBECONFIG", envList}, home, clusterSource{Kubeconfig: env2}},
		{"home", "", nil, home, clusterSource{Kubeconfig: homeCfg}},
		{"empty KUBERNETES_SERVICE_HOST is unset", "", []string{"KUBERNETES_SERVICE_HOST", ""}, home, clusterSource{Kubeconfig: homeCfg}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveClusterSource(tc.flag, envOf(tc.env...), tc.home)
			if err != nil {
				t.Fatal(err)
			}
			if got.InCluster != tc.want.InCluster || got.Kubeconfig != tc.want.Kubeconfig {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := resolveClusterSource("", envOf(), ""); !errors.Is(err, errNoClusterConfig) {
		t.Errorf("nothing anywhere: err = %v, want errNoClusterConfig", err)
	}
}
