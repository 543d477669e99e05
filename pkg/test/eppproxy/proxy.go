// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package eppproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// GIE EPP protocol names the proxy looks for.
const (
	NamespaceLB        = "envoy.lb"
	KeyDestination     = "x-gateway-destination-endpoint"
	KeyServed          = "x-gateway-destination-endpoint-served"
	DefaultRequestIDHd = "x-test-request-id"
)

// UpstreamTLS is how the proxy talks TLS to the EPP; ALPN is always h2.
type UpstreamTLS struct {
	// InsecureSkipVerify accepts any server certificate (the seed's
	// DestinationRule: SIMPLE, insecureSkipVerify).
	InsecureSkipVerify bool
	// CAPEM, when set, is the only trusted CA.
	CAPEM []byte
	// ServerName overrides the name checked and sent in SNI.
	ServerName string
}

// Config is the proxy's validated configuration.
type Config struct {
	// Upstream is the EPP's host:port (required).
	Upstream string
	// UpstreamTLS nil means plaintext (h2c) to the EPP.
	UpstreamTLS *UpstreamTLS
	// ServeTLS makes the proxy serve TLS with a fresh self-signed
	// certificate (see Proxy.ClientTLS); otherwise it serves plaintext.
	ServeTLS bool
	// ListenAddr defaults to 127.0.0.1:0; it must be a loopback address.
	ListenAddr string
	// RequestIDHeader names the request header recorded as RequestID
	// (default x-test-request-id).
	RequestIDHeader string
}

func (c *Config) validate() error {
	if c.Upstream == "" {
		return errors.New("eppproxy: Config.Upstream is required")
	}
	if c.ListenAddr == "" {
		c.ListenAddr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(c.ListenAddr)
	if err != nil {
		return fmt.Errorf("eppproxy: ListenAddr: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("eppproxy: ListenAddr %q is not a loopback address", c.ListenAddr)
	}
	if c.RequestIDHeader == "" {
		c.RequestIDHeader = DefaultRequestIDHd
	}
	c.RequestIDHeader = strings.ToLower(c.RequestIDHeader)
	return nil
}

// Immediate is an ImmediateResponse the EPP sent.
type Immediate struct {
	Status  int
	Details string
	Body    string
}

// Record is what one Process stream carried.
type Record struct {
	// Stream numbers streams in the order they started, from 1.
	Stream int
	// RequestID is the value of Config.RequestIDHeader in the request
	// headers ("" if absent).
	RequestID string
	// RequestHeaders are the request headers the data plane sent, keys as
	// sent (lower case, pseudo-headers included).
	RequestHeaders map[string][]string
	// ResponseStatus is the :status of the response headers the data
	// plane sent ("" if none). A stream may carry response headers only:
	// a local reply of a filter before ext_proc (an ext_authz denial) goes
	// through ext_proc's encoder side, which opens a stream for it.
	ResponseStatus string
	// PickedMetadata is envoy.lb / x-gateway-destination-endpoint from the
	// EPP's dynamic_metadata (the last one set).
	PickedMetadata string
	// PickedHeader is the x-gateway-destination-endpoint request header the
	// EPP set in a header mutation.
	PickedHeader string
	// Immediate is the EPP's immediate response, if any.
	Immediate *Immediate
	// Served is envoy.lb / x-gateway-destination-endpoint-served the data
	// plane reported in a metadata_context.
	Served string
	// FromDataPlane and FromEPP count the messages forwarded each way.
	FromDataPlane, FromEPP int
	// Done is set when the stream ended; Code and Message are the status
	// returned to the data plane (codes.OK for a clean close).
	Done    bool
	Code    codes.Code
	Message string
}

// Proxy is a running recording proxy.
type Proxy struct {
	extprocsvc.UnimplementedExternalProcessorServer
	cfg     Config
	lis     net.Listener
	srv     *grpc.Server
	up      *grpc.ClientConn
	client  extprocsvc.ExternalProcessorClient
	cert    *SelfSigned
	pumps   sync.WaitGroup
	served  chan struct{}
	mu      sync.Mutex
	records []*Record
	once    sync.Once
}

// Start listens and serves until Close or until ctx ends.
func Start(ctx context.Context, cfg Config) (*Proxy, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, served: make(chan struct{})}
	upCreds := insecure.NewCredentials()
	if t := cfg.UpstreamTLS; t != nil {
		tc := &tls.Config{InsecureSkipVerify: t.InsecureSkipVerify, ServerName: t.ServerName, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12} //nolint:gosec // test proxy, as the seed's DestinationRule
		if len(t.CAPEM) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(t.CAPEM) {
				return nil, errors.New("eppproxy: UpstreamTLS.CAPEM holds no certificate")
			}
			tc.RootCAs = pool
		}
		upCreds = credentials.NewTLS(tc)
	}
	up, err := grpc.NewClient(cfg.Upstream, grpc.WithTransportCredentials(upCreds))
	if err != nil {
		return nil, fmt.Errorf("eppproxy: upstream %s: %w", cfg.Upstream, err)
	}
	p.up, p.client = up, extprocsvc.NewExternalProcessorClient(up)

	var opts []grpc.ServerOption
	if cfg.ServeTLS {
		if p.cert, err = NewSelfSigned(); err != nil {
			_ = up.Close()
			return nil, err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(p.cert.ServerTLS())))
	}
	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		_ = up.Close()
		return nil, fmt.Errorf("eppproxy: listen: %w", err)
	}
	p.lis = lis
	p.srv = grpc.NewServer(opts...)
	extprocsvc.RegisterExternalProcessorServer(p.srv, p)
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(lis)
	}()
	go func() {
		select {
		case <-ctx.Done():
			p.Close()
		case <-p.served:
		}
	}()
	return p, nil
}

// Addr is the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// ClientTLS is a client config that trusts the proxy's certificate (ALPN
// h2); nil when the proxy serves plaintext.
func (p *Proxy) ClientTLS() *tls.Config {
	if p.cert == nil {
		return nil
	}
	return p.cert.ClientTLS()
}

// CertPEM is the proxy's certificate (nil when plaintext).
func (p *Proxy) CertPEM() []byte {
	if p.cert == nil {
		return nil
	}
	return append([]byte(nil), p.cert.PEM...)
}

// Close stops serving, ends every open stream and waits for them.
func (p *Proxy) Close() {
	p.once.Do(func() {
		p.srv.Stop()
		<-p.served
		p.pumps.Wait()
		_ = p.up.Close()
	})
}

// Records returns a copy of every stream's record, in start order.
func (p *Proxy) Records() []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Record, len(p.records))
	for i, r := range p.records {
		out[i] = r.copy()
	}
	return out
}

// Record returns the latest stream whose request carried requestID.
func (p *Proxy) Record(requestID string) (Record, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.records) - 1; i >= 0; i-- {
		if p.records[i].RequestID == requestID {
			return p.records[i].copy(), true
		}
	}
	return Record{}, false
}

func (r *Record) copy() Record {
	c := *r
	c.RequestHeaders = make(map[string][]string, len(r.RequestHeaders))
	for k, v := range r.RequestHeaders {
		c.RequestHeaders[k] = append([]string(nil), v...)
	}
	if r.Immediate != nil {
		im := *r.Immediate
		c.Immediate = &im
	}
	return c
}

func (p *Proxy) newRecord() *Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := &Record{Stream: len(p.records) + 1, RequestHeaders: map[string][]string{}}
	p.records = append(p.records, r)
	return r
}

func (p *Proxy) update(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

// Process forwards one stream: data plane messages to the EPP as they
// come (and its half-close as CloseSend), EPP messages back, and the EPP's
// final status (or a clean close) back to the data plane unchanged.
func (p *Proxy) Process(down extprocsvc.ExternalProcessor_ProcessServer) error {
	rec := p.newRecord()
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	if md, ok := metadata.FromIncomingContext(down.Context()); ok {
		ctx = metadata.NewOutgoingContext(ctx, forwardable(md))
	}
	finish := func(err error) error {
		st := status.Convert(err)
		p.update(func() { rec.Done, rec.Code, rec.Message = true, st.Code(), st.Message() })
		return err
	}
	upStream, err := p.client.Process(ctx)
	if err != nil {
		// Record the data plane's first message (its request headers) so a
		// test still finds the stream by request id.
		if m, rerr := down.Recv(); rerr == nil {
			p.update(func() { rec.FromDataPlane++; observeRequest(rec, m, p.cfg.RequestIDHeader) })
		}
		return finish(status.Convert(err).Err())
	}
	p.pumps.Add(1)
	go func() {
		defer p.pumps.Done()
		for {
			m, err := down.Recv()
			if errors.Is(err, io.EOF) {
				_ = upStream.CloseSend()
				return
			}
			if err != nil {
				cancel()
				return
			}
			p.update(func() { rec.FromDataPlane++; observeRequest(rec, m, p.cfg.RequestIDHeader) })
			if err := upStream.Send(m); err != nil {
				return // the status arrives through upStream.Recv
			}
		}
	}()
	for {
		m, err := upStream.Recv()
		if errors.Is(err, io.EOF) {
			return finish(nil)
		}
		if err != nil {
			return finish(status.Convert(err).Err())
		}
		p.update(func() { rec.FromEPP++; observeResponse(rec, m) })
		if err := down.Send(m); err != nil {
			return finish(err)
		}
	}
}

// forwardable drops the transport's own headers from the data plane's
// metadata before it goes on to the EPP.
func forwardable(md metadata.MD) metadata.MD {
	out := metadata.MD{}
	for k, v := range md {
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "user-agent" || k == "te" {
			continue
		}
		out[k] = v
	}
	return out
}

func observeRequest(rec *Record, m *extprocsvc.ProcessingRequest, idHeader string) {
	if rh := m.GetRequestHeaders(); rh != nil {
		for _, h := range rh.GetHeaders().GetHeaders() {
			v := string(h.GetRawValue())
			if v == "" {
				v = h.GetValue()
			}
			rec.RequestHeaders[h.GetKey()] = append(rec.RequestHeaders[h.GetKey()], v)
			if strings.ToLower(h.GetKey()) == idHeader && rec.RequestID == "" {
				rec.RequestID = v
			}
		}
	}
	for _, h := range m.GetResponseHeaders().GetHeaders().GetHeaders() {
		if h.GetKey() == ":status" {
			rec.ResponseStatus = string(h.GetRawValue()) + h.GetValue()
		}
	}
	if s := m.GetMetadataContext().GetFilterMetadata()[NamespaceLB].GetFields()[KeyServed].GetStringValue(); s != "" {
		rec.Served = s
	}
}

func observeResponse(rec *Record, m *extprocsvc.ProcessingResponse) {
	if s := m.GetDynamicMetadata().GetFields()[NamespaceLB].GetStructValue().GetFields()[KeyDestination].GetStringValue(); s != "" {
		rec.PickedMetadata = s
	}
	var mut *extprocsvc.HeaderMutation
	switch {
	case m.GetRequestHeaders() != nil:
		mut = m.GetRequestHeaders().GetResponse().GetHeaderMutation()
	case m.GetRequestBody() != nil:
		mut = m.GetRequestBody().GetResponse().GetHeaderMutation()
	case m.GetImmediateResponse() != nil:
		ir := m.GetImmediateResponse()
		rec.Immediate = &Immediate{Status: int(ir.GetStatus().GetCode()), Details: ir.GetDetails(), Body: string(ir.GetBody())}
	}
	for _, sh := range mut.GetSetHeaders() {
		if strings.ToLower(sh.GetHeader().GetKey()) == KeyDestination {
			v := string(sh.GetHeader().GetRawValue())
			if v == "" {
				v = sh.GetHeader().GetValue()
			}
			rec.PickedHeader = v
		}
	}
}
