// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeUserAgent is the User-Agent of the kubelet's HTTP probes, at the
// Kubernetes version this node stands in for.
const probeUserAgent = "kube-probe/1.37"

// probeBodyLimit is how much of an HTTP probe's response body is read, as
// the kubelet reads at most 10 KiB.
const probeBodyLimit = 10 * 1024

// runProbe runs one probe of the container c of a pod at podIP, from the
// host, as the kubelet's prober does (k8s.io/kubernetes pkg/probe/http, tcp,
// grpc): nil means success, an error the failure's message.
func runProbe(ctx context.Context, p *corev1.Probe, c *corev1.Container, podIP string) error {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		return httpProbe(ctx, p.HTTPGet, c, podIP)
	case p.TCPSocket != nil:
		return tcpProbe(ctx, p.TCPSocket, c, podIP)
	case p.GRPC != nil:
		return grpcProbe(ctx, p.GRPC, podIP)
	default:
		return errors.New("probe has no handler this node runs (httpGet, tcpSocket, grpc)")
	}
}

// httpProbe succeeds on a status in [200, 400). Redirects are followed
// within the same host; a redirect to another host counts as success, as in
// the kubelet.
func httpProbe(ctx context.Context, g *corev1.HTTPGetAction, c *corev1.Container, podIP string) error {
	port, err := probePort(g.Port, c)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = podIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	u, err = u.Parse(path)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", probeUserAgent)
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Set(h.Name, h.Value)
	}
	client := &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet does not verify probe certificates
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if r.URL.Hostname() != u.Hostname() || len(via) >= 10 {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, probeBodyLimit))
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return nil
	}
	return fmt.Errorf("HTTP probe failed with statuscode: %d (%s)", resp.StatusCode, strings.TrimSpace(string(body)))
}

// tcpProbe succeeds when a TCP connection opens.
func tcpProbe(ctx context.Context, s *corev1.TCPSocketAction, c *corev1.Container, podIP string) error {
	port, err := probePort(s.Port, c)
	if err != nil {
		return err
	}
	host := s.Host
	if host == "" {
		host = podIP
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return conn.Close()
}

// grpcProbe calls grpc.health.v1.Health/Check with the probe's service (""
// when unset), in plaintext, and succeeds on SERVING.
func grpcProbe(ctx context.Context, g *corev1.GRPCAction, podIP string) error {
	conn, err := grpc.NewClient(net.JoinHostPort(podIP, strconv.Itoa(int(g.Port))),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(probeUserAgent))
	if err != nil {
		return err
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return fmt.Errorf("gRPC probe: %w", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.GetStatus())
	}
	return nil
}

// probePort resolves a probe port, by number or by the name of one of the
// container's ports.
func probePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal < 1 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port number: %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("couldn't find port %q in container %s", p.StrVal, c.Name)
}
