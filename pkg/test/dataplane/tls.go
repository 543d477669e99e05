// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// TLS termination on a listener, as Envoy does it:
//
//   - The TLS inspector listener filter (envoy.filters.listener.tls_inspector,
//     source/extensions/filters/listener/tls_inspector/tls_inspector.cc)
//     reads the ClientHello's SNI and ALPN before a filter chain is chosen.
//     Without it Envoy never sees a server name and a chain with
//     server_names never matches; the data plane refuses (NACK) a listener
//     whose chains match on server_names without the inspector (stricter).
//   - Filter chain selection (source/common/listener_manager/
//     filter_chain_manager_impl.cc, findFilterChainForServerName): a chain
//     whose server_names holds the SNI exactly; else the chain with the
//     longest wildcard "*.<suffix>" that the SNI ends with (the SNI
//     "a.b.example.com" tries "*.b.example.com", then "*.example.com", ...);
//     else a chain without server_names. No chain matches: the connection
//     is closed (the listener's no_filter_chain_match stat; no
//     default_filter_chain is implemented). Two chains with the same match
//     are refused, as Envoy refuses them ("multiple filter chains with the
//     same matching rules are defined").
//   - The chain's DownstreamTlsContext terminates TLS with the certificate
//     of its SDS secret, offering the chain's alpn_protocols
//     (source/common/tls/context_impl.cc, ServerContextImpl); h2 selects
//     HTTP/2, anything else HTTP/1.1 (the HCM's codec AUTO).
//   - SDS (source/common/secret/sds_api.cc): the secret is fetched by name
//     over ADS; its subscription is an init target of the listener, so a
//     listener warms until every secret of its chains has arrived
//     (dataplane.go publishLocked). An update of the secret changes the
//     certificate of new handshakes only; the listener, and connections
//     already open, are untouched.
//   - A connection keeps the filter chain (and so the connection manager)
//     chosen at its handshake.
//
// Where the stand-in differs (architecture/dataplane.md): Go's TLS stack
// ends a handshake with an alert where Envoy closes the socket without
// one (no chain matches), and refuses a client whose ALPN list shares no
// protocol with the chain's (no_application_protocol) where BoringSSL
// goes on without ALPN: both are stricter. An SNI is matched as sent,
// byte for byte (stricter than a case-insensitive match).

const listenerFilterTLSInspector = "envoy.filters.listener.tls_inspector"

// tlsChain is one filter chain of a TLS listener.
type tlsChain struct {
	name string
	// serverNames is filter_chain_match.server_names; empty matches any
	// server name (and a ClientHello without SNI).
	serverNames []string
	// sdsName is the one tls_certificate_sds_secret_configs entry.
	sdsName string
	// alpn is common_tls_context.alpn_protocols.
	alpn []string
	// clientAuth and clientCAs are the chain's client-certificate
	// validation (compileClientValidation); tls.NoClientCert without a
	// validation context.
	clientAuth tls.ClientAuthType
	clientCAs  *x509.CertPool
	// hcm is the chain's connection manager.
	hcm *listenerConfig
}

// compileTLSListener compiles a listener whose filter chains terminate TLS:
// the TLS inspector, then every chain with a transport socket, its
// server_names and its connection manager over RDS.
func compileTLSListener(l *listenerv3.Listener, re regexEngine) (*listenerConfig, error) {
	lc, err := listenerAddress(l)
	if err != nil {
		return nil, err
	}
	inspector := false
	for i, lf := range l.GetListenerFilters() {
		msg, err := lf.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("listener_filters[%d] %s: %w", i, lf.GetName(), err)
		}
		if _, ok := msg.(*tlsinspectorv3.TlsInspector); !ok || lf.GetName() != listenerFilterTLSInspector {
			return nil, fmt.Errorf("listener_filters[%d] %s (%T) not implemented", i, lf.GetName(), msg)
		}
		inspector = true
	}
	if len(l.GetFilterChains()) == 0 {
		return nil, errors.New("no filter chains")
	}
	seen := map[string]string{} // server name ("" for none) -> chain
	for i, fc := range l.GetFilterChains() {
		c := &tlsChain{name: fc.GetName(), serverNames: fc.GetFilterChainMatch().GetServerNames()}
		if fc.GetTransportSocket() == nil {
			return nil, fmt.Errorf("filter_chains[%d] %s: a chain without TLS beside TLS chains is not implemented", i, c.name)
		}
		if err := c.compileTLS(fc.GetTransportSocket().GetName(), fc); err != nil {
			return nil, fmt.Errorf("filter_chains[%d] %s: %w", i, c.name, err)
		}
		if len(c.serverNames) > 0 && !inspector {
			return nil, fmt.Errorf("filter_chains[%d] %s: server_names without the %s listener filter never match", i, c.name, listenerFilterTLSInspector)
		}
		keys := c.serverNames
		if len(keys) == 0 {
			keys = []string{""}
		}
		for _, sn := range keys {
			if prev, dup := seen[sn]; dup {
				return nil, fmt.Errorf("multiple filter chains with the same matching rules are defined: %s and %s (server name %q)", prev, c.name, sn)
			}
			seen[sn] = c.name
		}
		c.hcm = &listenerConfig{name: lc.name, address: lc.address, port: lc.port}
		hcm, err := compileChainHCM(c.hcm, fc, re)
		if err != nil {
			return nil, fmt.Errorf("filter_chains[%d] %s: %w", i, c.name, err)
		}
		if err := compileRDS(c.hcm, hcm); err != nil {
			return nil, fmt.Errorf("filter_chains[%d] %s: %w", i, c.name, err)
		}
		lc.tlsChains = append(lc.tlsChains, c)
	}
	return lc, nil
}

// compileTLS takes the chain's DownstreamTlsContext: one certificate over
// SDS from ADS (initial_fetch_timeout 0 or unset: the listener waits for
// it), ALPN and client-certificate validation (compileClientValidation).
// Every other option is refused (allowed.go lets CommonTlsContext's fields in for upstream TLS
// too, so the refusal of those a server does not implement is here).
func (c *tlsChain) compileTLS(name string, fc *listenerv3.FilterChain) error {
	if name != transportSocketTLS {
		return fmt.Errorf("transport socket %q not implemented", name)
	}
	var d tlsv3.DownstreamTlsContext
	if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(&d); err != nil {
		return err
	}
	ctc := d.GetCommonTlsContext()
	if err := c.compileClientValidation(&d); err != nil {
		return err
	}
	sds := ctc.GetTlsCertificateSdsSecretConfigs()
	if len(sds) != 1 {
		return fmt.Errorf("exactly one tls_certificate_sds_secret_configs entry is implemented, got %d", len(sds))
	}
	src := sds[0].GetSdsConfig()
	if src.GetAds() == nil {
		return errors.New("the SDS secret must come over ADS")
	}
	if t := src.GetInitialFetchTimeout(); t != nil && t.AsDuration() != 0 {
		// Envoy would let the listener go warm without its certificate
		// after the timeout, and fail every handshake.
		return errors.New("sds_config.initial_fetch_timeout other than 0 not implemented")
	}
	c.sdsName, c.alpn = sds[0].GetName(), ctc.GetAlpnProtocols()
	return nil
}

// compileClientValidation takes the chain's client-certificate
// validation, as Envoy's server context sets it up
// (source/common/tls/cert_validator/default_validator.cc,
// DefaultCertValidator::initializeSslContexts and addClientValidationContext;
// source/common/tls/server_context_impl.cc):
//
//   - trusted_ca set: a client certificate is requested (SSL_VERIFY_PEER)
//     and, when presented, must chain to one of the CAs (partial chains
//     allowed: any certificate of the bundle is an anchor, as Go's roots
//     are); require_client_certificate also fails a handshake without one
//     (SSL_VERIFY_FAIL_IF_NO_PEER_CERT).
//   - trust_chain_verification ACCEPT_UNTRUSTED: a certificate is still
//     requested, but one that fails verification is accepted
//     (allow_untrusted_certificate_); with require_client_certificate one
//     must still be presented.
//   - a trusted_ca that holds no certificate fails the listener ("Failed to
//     load trusted CA certificates"), so the update is NACKed.
//
// Every other validation option (SAN matchers, hashes, CRLs, SDS-delivered
// validation contexts) is refused by allowed.go or here: not implemented.
// require_client_certificate without trusted_ca is refused too (stricter:
// Envoy then requests no certificate at all, which is surely not what such
// a configuration means).
func (c *tlsChain) compileClientValidation(d *tlsv3.DownstreamTlsContext) error {
	require := d.GetRequireClientCertificate().GetValue()
	ctc := d.GetCommonTlsContext()
	if ctc.GetValidationContextType() != nil && ctc.GetValidationContext() == nil {
		return errors.New("common_tls_context: only an inline validation_context is implemented on a listener")
	}
	vc := ctc.GetValidationContext()
	if vc == nil {
		if require {
			return errors.New("require_client_certificate without a validation_context trusted_ca not implemented")
		}
		c.clientAuth = tls.NoClientCert
		return nil
	}
	if len(vc.GetMatchTypedSubjectAltNames()) > 0 {
		return errors.New("validation_context.match_typed_subject_alt_names not implemented on a listener")
	}
	if vc.GetTrustedCa() == nil {
		return errors.New("validation_context without trusted_ca not implemented on a listener")
	}
	pemBytes, err := dataSourceBytes(vc.GetTrustedCa())
	if err != nil {
		return fmt.Errorf("trusted_ca: %w", err)
	}
	pool, err := trustedCAPool(pemBytes)
	if err != nil {
		return fmt.Errorf("trusted_ca: %w", err)
	}
	untrusted := false
	switch vc.GetTrustChainVerification() {
	case tlsv3.CertificateValidationContext_VERIFY_TRUST_CHAIN:
	case tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED:
		untrusted = true
	default:
		return fmt.Errorf("trust_chain_verification %v not implemented", vc.GetTrustChainVerification())
	}
	switch {
	case untrusted && require:
		c.clientAuth = tls.RequireAnyClientCert
	case untrusted:
		c.clientAuth = tls.RequestClientCert
	case require:
		c.clientAuth = tls.RequireAndVerifyClientCert
	default:
		c.clientAuth = tls.VerifyClientCertIfGiven
	}
	c.clientCAs = pool
	return nil
}

// selectChain is Envoy's filter chain match on the server name sni ("" when
// the ClientHello has none): exact, then the longest wildcard suffix, then
// a chain without server_names; nil when none matches.
func selectChain(chains []*tlsChain, sni string) *tlsChain {
	var any *tlsChain
	for _, c := range chains {
		if len(c.serverNames) == 0 && any == nil {
			any = c
		}
		for _, n := range c.serverNames {
			if sni != "" && n == sni {
				return c
			}
		}
	}
	if sni != "" {
		for i := strings.IndexByte(sni, '.'); i >= 0; {
			wildcard := "*" + sni[i:]
			for _, c := range chains {
				for _, n := range c.serverNames {
					if n == wildcard {
						return c
					}
				}
			}
			next := strings.IndexByte(sni[i+1:], '.')
			if next < 0 {
				break
			}
			i += 1 + next
		}
	}
	return any
}

// tlsConnChain holds the filter chain a TLS connection was given at its
// handshake.
type tlsConnChain struct {
	mu    sync.Mutex
	chain *tlsChain
}

func (h *tlsConnChain) get() *tlsChain {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.chain
}

type tlsChainKey struct{}

// tlsListener accepts TCP connections for the TLS listener called name and
// hands them on as TLS server connections whose handshake picks the
// filter chain and certificate from the active configuration.
type tlsListener struct {
	net.Listener
	dp    *DataPlane
	name  string
	conns sync.Map // *tls.Conn -> *tlsConnChain
}

func (l *tlsListener) Accept() (net.Conn, error) {
	raw, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	holder := &tlsConnChain{}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		return l.dp.handshakeConfig(l.name, hello, holder)
	}}
	c := tls.Server(raw, cfg)
	l.conns.Store(c, holder)
	return c, nil
}

// handshakeConfig picks the filter chain for a ClientHello on listener
// name and returns the TLS configuration of its chain: the current
// certificate of its SDS secret and its ALPN protocols. An error closes
// the connection.
func (dp *DataPlane) handshakeConfig(name string, hello *tls.ClientHelloInfo, holder *tlsConnChain) (*tls.Config, error) {
	ac := dp.active.Load()
	l := ac.listeners[name]
	if l == nil {
		return nil, fmt.Errorf("listener %s is gone", name)
	}
	c := selectChain(l.tlsChains, hello.ServerName)
	if c == nil {
		dp.counters.noFilterChainMatch.Add(1)
		dp.log.Debug("dataplane: no matching filter chain found; closing the connection", "listener", name, "sni", hello.ServerName)
		return nil, fmt.Errorf("listener %s: no filter chain matches server name %q", name, hello.ServerName)
	}
	cert := ac.secrets[c.sdsName]
	if cert == nil {
		// Cannot happen: a listener is active only with its secrets.
		return nil, fmt.Errorf("listener %s chain %s: secret %s missing", name, c.name, c.sdsName)
	}
	holder.mu.Lock()
	holder.chain = c
	holder.mu.Unlock()
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, NextProtos: c.alpn,
		ClientAuth: c.clientAuth, ClientCAs: c.clientCAs}, nil
}

// serveTLS serves the TLS listener called name on ln: HTTP/2 when ALPN
// selects h2, else HTTP/1.1.
func serveTLS(dp *DataPlane, name string, port uint32, ln net.Listener) *boundListener {
	tl := &tlsListener{Listener: ln, dp: dp, name: name}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	b := &boundListener{name: name, port: port, ln: ln, done: make(chan struct{})}
	b.srv = &http.Server{
		Handler: &listenerHandler{dp: dp, name: name}, Protocols: &protos, ReadHeaderTimeout: time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if h, ok := tl.conns.Load(c); ok {
				return context.WithValue(ctx, tlsChainKey{}, h.(*tlsConnChain))
			}
			return ctx
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				tl.conns.Delete(c)
			}
		},
	}
	go func() {
		defer close(b.done)
		_ = b.srv.Serve(tl)
	}()
	return b
}

// connectionChain is the connection manager of the filter chain the
// request's TLS connection was given; nil for a connection without TLS.
func connectionChain(r *http.Request) *listenerConfig {
	h, _ := r.Context().Value(tlsChainKey{}).(*tlsConnChain)
	if h == nil {
		return nil
	}
	if c := h.get(); c != nil {
		return c.hcm
	}
	return nil
}

// compileSecret loads an SDS secret: a TlsCertificate with its chain and
// private key inline. A chain or key that does not load is refused (NACK),
// as Envoy refuses an SDS update whose TLS context cannot be built
// (ContextConfigImpl / ServerContextImpl throwing from the secret's update
// callback, source/common/secret/sds_api.cc onConfigUpdate). Validation
// contexts, session ticket keys and generic secrets are not implemented.
func compileSecret(s *tlsv3.Secret) (*tls.Certificate, error) {
	tc := s.GetTlsCertificate()
	if tc == nil {
		return nil, errors.New("only tls_certificate secrets are implemented")
	}
	chain, err := dataSourceBytes(tc.GetCertificateChain())
	if err != nil {
		return nil, fmt.Errorf("certificate_chain: %w", err)
	}
	key, err := dataSourceBytes(tc.GetPrivateKey())
	if err != nil {
		return nil, fmt.Errorf("private_key: %w", err)
	}
	cert, err := tls.X509KeyPair(chain, key)
	if err != nil {
		// crypto/tls's message never quotes the key.
		return nil, fmt.Errorf("failed to load certificate chain and private key: %v", err)
	}
	return &cert, nil
}

// trustedCAPool loads a CertificateValidationContext's trusted_ca as
// Envoy does (source/common/tls/cert_validator/default_validator.cc,
// DefaultCertValidator::initializeSslContexts): BoringSSL's
// PEM_X509_INFO_read_bio reads the whole bundle, and a block it cannot
// read, or a bundle with no certificate, fails with "Failed to load
// trusted CA certificates", which refuses the cluster or the listener.
// crypto/x509's AppendCertsFromPEM would instead skip a bad block and load
// the rest. Text outside the blocks is skipped, as BoringSSL does.
// Stricter than Envoy: a block of another type than CERTIFICATE (Envoy
// also takes an X509 CRL) is refused.
func trustedCAPool(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("failed to load trusted CA certificates: PEM block %d is %q (not implemented)", n, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("failed to load trusted CA certificates: PEM block %d: %v", n, err)
		}
		pool.AddCert(c)
	}
	// encoding/pem skips a block it cannot decode and goes on.
	if begins := bytes.Count(data, []byte("-----BEGIN ")); begins > n {
		return nil, fmt.Errorf("failed to load trusted CA certificates: %d of %d PEM blocks do not decode", begins-n, begins)
	}
	if n == 0 {
		return nil, errors.New("failed to load trusted CA certificates: no PEM certificate")
	}
	return pool, nil
}
