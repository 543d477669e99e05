// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
)

// newEtcd is a single-member etcd on loopback, without fsync (test data only).
func newEtcd(bin string, f files, clientPort, peerPort int) *process {
	client := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	return &process{
		name:    "etcd",
		path:    filepath.Join(bin, "etcd"),
		logPath: filepath.Join(f.logs, "etcd.log"),
		args: []string{
			"--name=kubeenv",
			"--data-dir=" + f.etcdData,
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=kubeenv=" + peer,
			"--unsafe-no-fsync",
			"--log-level=warn",
		},
	}
}

// etcdHealthy reports whether etcd at url answers its /health check.
func etcdHealthy(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}
