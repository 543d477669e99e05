// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"time"
)

// serviceCIDR is the Service ClusterIP range; ClusterIPs are allocated from it
// but nothing routes them.
const serviceCIDR = "10.96.0.0/24"

// KubernetesServiceIP is the ClusterIP of the default/kubernetes Service: the
// first address of serviceCIDR, as the apiserver allocates it.
const KubernetesServiceIP = "10.96.0.1"

// newAPIServer is kube-apiserver on 127.0.0.1:port with RBAC, the static tokens
// of files.go, and an audit log of every request.
//
// --advertise-address=127.0.0.1 needs --endpoint-reconciler-type=none (the
// default reconciler refuses a loopback address for the kubernetes Service).
// The ServiceAccount admission plugin is off (unless WithServiceAccountAdmission),
// so pods can be created in a new namespace before the serviceaccount
// controller has made its default account.
func newAPIServer(bin string, f files, port, etcdPort int, extra []string, serviceAccountAdmission bool) *process {
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--endpoint-reconciler-type=none",
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--tls-cert-file=" + f.servingCert,
		"--tls-private-key-file=" + f.servingKey,
		"--token-auth-file=" + f.tokens,
		"--authorization-mode=RBAC",
		"--service-account-key-file=" + f.serviceAccount,
		"--service-account-signing-key-file=" + f.serviceAccount,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		"--audit-policy-file=" + f.auditPolicy,
		"--audit-log-path=" + f.auditLog,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		// Kubelets (the node agent of pkg/test/node) are reached at their
		// Node's InternalIP with this client certificate, for pods/log.
		"--kubelet-client-certificate=" + f.kubeletCert,
		"--kubelet-client-key=" + f.kubeletKey,
		"--kubelet-preferred-address-types=InternalIP",
	}
	if !serviceAccountAdmission {
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	return &process{
		name:    "kube-apiserver",
		path:    filepath.Join(bin, "kube-apiserver"),
		logPath: filepath.Join(f.logs, "kube-apiserver.log"),
		args:    append(args, extra...),
	}
}

// readyzClient returns a check that kube-apiserver's /readyz answers 200.
func readyzClient(c credentials) func(context.Context) bool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.caPEM)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
	return func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.host+"/readyz", nil)
		if err != nil {
			return false
		}
		req.Header.Set("Authorization", "Bearer "+c.adminToken)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK
	}
}

// StopAPIServer kills kube-apiserver (SIGKILL, no graceful shutdown) and returns
// once it has exited; etcd and kube-controller-manager keep running, and client
// requests fail until StartAPIServer. It fails the test if the process cannot be
// stopped. Stopping a stopped apiserver does nothing.
func (e *Env) StopAPIServer() {
	e.t.Helper()
	if err := e.apiServer.stop(0); err != nil {
		e.t.Fatal(err)
	}
}

// StartAPIServer starts kube-apiserver again, on the same port with the same
// certificates, tokens and etcd data, and returns once /readyz answers (bounded
// by WithStartupTimeout, 90 s by default). It fails the test if the apiserver is
// already running or does not become ready.
func (e *Env) StartAPIServer() {
	e.t.Helper()
	began := time.Now()
	if err := e.apiServer.start(); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.startupTimeout)
	defer cancel()
	if err := waitFor(ctx, e.apiServer, "kube-apiserver /readyz", readyzClient(e.creds)); err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("kubeenv: kube-apiserver ready again after %v", time.Since(began).Round(time.Millisecond))
}
