// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
)

// newScheduler is kube-scheduler acting as SchedulerUser, without leader
// election, with its HTTPS port (health, metrics) on 127.0.0.1:port. The same
// kubeconfig serves the delegated authentication and authorization of that
// port, as kubeadm sets it up; the bootstrap RBAC of system:kube-scheduler
// allows the TokenReviews and SubjectAccessReviews this needs.
func newScheduler(bin string, f files, port int) *process {
	return &process{
		name:    "kube-scheduler",
		path:    filepath.Join(bin, schedulerBinary),
		logPath: filepath.Join(f.logs, "kube-scheduler.log"),
		args: []string{
			"--kubeconfig=" + f.schedConfig,
			"--authentication-kubeconfig=" + f.schedConfig,
			"--authorization-kubeconfig=" + f.schedConfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
		},
	}
}

// schedulerReady returns a check that kube-scheduler's /readyz on port answers
// 200. /readyz is on the scheduler's always-allowed paths, so the check needs
// no credentials. Its serving certificate is one it made for itself in memory,
// so the check does not verify it: it only asks a loopback port this Env chose.
func schedulerReady(port int) func(context.Context) bool {
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // loopback health probe, see above
		DisableKeepAlives: true,
	}}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
	return func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK
	}
}
