// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package clusterdns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Config is what Start needs.
type Config struct {
	// Client reads Services and EndpointSlices.
	Client kubernetes.Interface
	// Addr is where to serve, UDP and TCP ("10.244.96.1:53"; port 0 picks
	// one, the same for both).
	Addr string
	// Domain is the cluster domain; empty means cluster.local (the
	// kubelet's --cluster-domain default in every distribution).
	Domain string
	// Upstream are the servers ("host:port") names outside Domain are
	// forwarded to, tried in order; none means such names are REFUSED.
	Upstream []string
}

// Server is a running cluster DNS server.
type Server struct {
	udp, tcp *dns.Server
	cancel   context.CancelFunc
	addr     string
}

// Start syncs the informers and serves until Stop.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Client == nil || cfg.Addr == "" {
		return nil, errors.New("clusterdns: Client and Addr are required")
	}
	domain := strings.Trim(strings.ToLower(cfg.Domain), ".")
	if domain == "" {
		domain = "cluster.local"
	}
	ctx, cancel := context.WithCancel(ctx)
	rec, err := startInformers(ctx, cfg.Client, domain)
	if err != nil {
		cancel()
		return nil, err
	}
	h := &handler{records: rec, zone: dns.Fqdn(domain), upstream: cfg.Upstream}
	s := &Server{cancel: cancel}
	if err := s.listen(cfg.Addr, h); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

func startInformers(ctx context.Context, client kubernetes.Interface, domain string) (*records, error) {
	factory := informers.NewSharedInformerFactory(client, 0)
	svc := factory.Core().V1().Services().Informer()
	sl := factory.Discovery().V1().EndpointSlices().Informer()
	if err := sl.AddIndexers(cache.Indexers{byService: serviceIndex}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("clusterdns: %v informer did not sync", typ)
		}
	}
	return &records{suffix: ".svc." + domain + ".", services: svc.GetStore(), slices: sl.GetIndexer()}, nil
}

// listen binds UDP and TCP on one port and serves both. With port 0 the
// kernel picks the UDP port, which a TCP socket of another process (an
// outgoing connection's ephemeral port among them) may hold already: then
// it tries another, a bounded number of times.
func (s *Server) listen(addr string, h dns.Handler) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("clusterdns: %w", err)
	}
	tries := 1
	if port == "0" {
		tries = 20
	}
	for i := 1; ; i++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return fmt.Errorf("clusterdns: %w", err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			pc.Close()
			if i < tries && errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			return fmt.Errorf("clusterdns: %w", err)
		}
		s.addr = pc.LocalAddr().String()
		s.udp = &dns.Server{PacketConn: pc, Handler: h}
		s.tcp = &dns.Server{Listener: l, Handler: h}
		go func() { _ = s.udp.ActivateAndServe() }()
		go func() { _ = s.tcp.ActivateAndServe() }()
		return nil
	}
}

// Addr is the address served ("ip:port").
func (s *Server) Addr() string { return s.addr }

// Stop stops serving and the informers.
func (s *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.udp.ShutdownContext(ctx)
	_ = s.tcp.ShutdownContext(ctx)
	s.cancel()
}

// Upstreams are the nameservers of a resolv.conf file (the host's
// /etc/resolv.conf) as Config.Upstream wants them.
func Upstreams(resolvConf string) ([]string, error) {
	cc, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return nil, fmt.Errorf("clusterdns: %w", err)
	}
	out := make([]string, 0, len(cc.Servers))
	for _, s := range cc.Servers {
		out = append(out, net.JoinHostPort(s, cc.Port))
	}
	return out, nil
}
