// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	vkapi "github.com/virtual-kubelet/virtual-kubelet/node/api"

	"github.com/infermesh/infermesh/pkg/test/certs"
)

// kubeletAPI is the part of the kubelet's HTTPS API (port 10250) that the
// API server proxies to: virtual-kubelet's pod routes (api.PodHandler),
// with container logs from containerLogs; exec, attach and port-forward
// answer "not implemented". The API server reaches it at the Node's
// InternalIP and status.daemonEndpoints.kubeletEndpoint.port, as it reaches
// a kubelet (kube-apiserver --kubelet-preferred-address-types=InternalIP).
// Like a kubelet it serves a self-signed certificate (the API server does
// not verify it without --kubelet-certificate-authority) and requires a
// client certificate: only the API server's kubelet client certificate
// (Config.KubeletClientCA) is accepted, so a pod on the bridge cannot read
// other pods' logs.
type kubeletAPI struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

func startKubeletAPI(p *provider) (*kubeletAPI, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.cfg.KubeletClientCA) {
		return nil, errors.New("node: KubeletClientCA holds no PEM certificate")
	}
	crtPEM, keyPEM, err := certs.SelfSignedFor(p.cfg.NodeName, []net.IP{net.ParseIP(p.hostIP())}, []string{p.cfg.NodeName})
	if err != nil {
		return nil, fmt.Errorf("node: kubelet API certificate: %w", err)
	}
	crt, err := tls.X509KeyPair(crtPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("node: kubelet API certificate: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(p.hostIP(), strconv.Itoa(p.cfg.KubeletPort)))
	if err != nil {
		return nil, fmt.Errorf("node: kubelet API: %w", err)
	}
	handler := vkapi.PodHandler(vkapi.PodHandlerConfig{GetContainerLogs: p.containerLogs}, false)
	a := &kubeletAPI{ln: ln, done: make(chan struct{}), srv: &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{crt},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
			MinVersion:   tls.VersionTLS12,
		},
	}}
	go func() {
		defer close(a.done)
		_ = a.srv.ServeTLS(ln, "", "")
	}()
	return a, nil
}

// close stops serving; streams in progress (a followed log) end.
func (a *kubeletAPI) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := a.srv.Shutdown(ctx)
	if err != nil {
		err = a.srv.Close()
	}
	<-a.done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
