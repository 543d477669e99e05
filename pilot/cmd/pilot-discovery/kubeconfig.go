// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/infermesh/infermesh/pkg/kube"
)

// errNoClusterConfig is returned by clusterSource.resolve when no cluster
// configuration is found; the wrapping error names every place tried.
var errNoClusterConfig = errors.New("no cluster configuration found")

// clusterSource says where the cluster connection comes from. Exactly one
// of InCluster and Kubeconfig is set.
type clusterSource struct {
	InCluster  bool
	Kubeconfig string
	// Tried is the search, for log lines and errors.
	Tried string
}

// resolveClusterSource picks the cluster configuration: the --kubeconfig
// flag when set (the file must exist); else the pod's service account when
// KUBERNETES_SERVICE_HOST is set; else $KUBECONFIG (a path list, as kubectl
// reads it); else ~/.kube/config. The error wraps errNoClusterConfig and
// names every place tried.
func resolveClusterSource(flag string, lookupEnv func(string) (string, bool), home string) (clusterSource, error) {
	if flag != "" {
		if _, err := os.Stat(flag); err != nil {
			return clusterSource{}, fmt.Errorf("--kubeconfig %q: %w", flag, err)
		}
		return clusterSource{Kubeconfig: flag, Tried: "--kubeconfig " + flag}, nil
	}
	if h, ok := lookupEnv("KUBERNETES_SERVICE_HOST"); ok && h != "" {
		return clusterSource{InCluster: true, Tried: "in-cluster service account (KUBERNETES_SERVICE_HOST=" + h + ")"}, nil
	}
	var tried []string
	tried = append(tried, "--kubeconfig (not set)", "in-cluster (KUBERNETES_SERVICE_HOST not set)")
	if env, ok := lookupEnv("KUBECONFIG"); ok && env != "" {
		for _, p := range filepath.SplitList(env) {
			if _, err := os.Stat(p); err == nil {
				return clusterSource{Kubeconfig: p, Tried: "$KUBECONFIG " + p}, nil
			}
		}
		tried = append(tried, fmt.Sprintf("$KUBECONFIG=%q (no such file)", env))
	} else {
		tried = append(tried, "$KUBECONFIG (not set)")
	}
	if home != "" {
		p := filepath.Join(home, ".kube", "config")
		if _, err := os.Stat(p); err == nil {
			return clusterSource{Kubeconfig: p, Tried: p}, nil
		}
		tried = append(tried, p+" (no such file)")
	} else {
		tried = append(tried, "~/.kube/config (no home directory)")
	}
	return clusterSource{}, fmt.Errorf("%w; tried %s", errNoClusterConfig, strings.Join(tried, ", "))
}

// newClient builds the kube.Client for src with the given rate-limit
// options. It does not contact the API server.
func newClient(src clusterSource, opts ...kube.Option) (*kube.Client, error) {
	if src.InCluster {
		return kube.NewInCluster(opts...)
	}
	return kube.NewFromKubeconfig(src.Kubeconfig, opts...)
}
