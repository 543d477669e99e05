// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/certs"

	"github.com/infermesh/infermesh/pkg/test/dataplane"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// mtlsRequest sends GET / to the listener on 443 with SNI and Host
// a.example.com, presenting cert when it is not nil; it returns the status
// or the error of the handshake or the request (with TLS 1.3 a refused
// client certificate shows on the first read, after the client's side of
// the handshake is done).
func mtlsRequest(t *testing.T, dp *dataplane.DataPlane, cert *tls.Certificate) (int, error) {
	t.Helper()
	cfg := &tls.Config{ServerName: "a.example.com", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}} //nolint:gosec // the server's certificate is not under test
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+dp.Addr(443).String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "a.example.com"
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestClientCertificateValidation checks a listener's client-certificate
// validation as Envoy sets it up (DefaultCertValidator::initializeSslContexts
// and addClientValidationContext, source/common/tls/cert_validator/
// default_validator.cc; DownstreamTlsContext.require_client_certificate and
// CertificateValidationContext.trust_chain_verification in the TLS
// transport socket's API reference):
//
//   - trusted_ca with require_client_certificate: only a certificate that
//     chains to the CA completes the handshake; none, or another CA's, fails;
//   - trusted_ca without require_client_certificate: no certificate is
//     accepted, a presented one must verify;
//   - ACCEPT_UNTRUSTED: any certificate, or none, is accepted.
//
// The listener's chain is built by the translator from model.ClientValidation.
func TestClientCertificateValidation(t *testing.T) {
	trusted, other := certs.NewCA(t), certs.NewCA(t)
	good, bad := trusted.ClientCert(t, "good"), other.ClientCert(t, "bad")
	build := func(cv *model.ClientValidation) *dataplane.DataPlane {
		t.Helper()
		gw := tlsGateway("a.example.com")
		gw.Listeners[0].TLS.ClientValidation = cv
		l, rc, secrets := tlsResources(t, gw)
		dp := newTestDP(t, dataplane.Options{})
		load(t, dp, append(rc, l, secrets[0])...)
		return dp
	}
	type outcome struct{ good, bad, none bool } // whether each client gets its 404 (no routes)
	for _, tc := range []struct {
		name string
		dp   *dataplane.DataPlane
		want outcome
	}{
		{name: "AllowValidOnly (require_client_certificate)", dp: build(&model.ClientValidation{CACertificates: trusted.PEM}),
			want: outcome{good: true}},
		{name: "AllowInsecureFallback (ACCEPT_UNTRUSTED)", dp: build(&model.ClientValidation{CACertificates: trusted.PEM, AllowInsecureFallback: true}),
			want: outcome{good: true, bad: true, none: true}},
		{name: "no validation", dp: build(nil), want: outcome{good: true, bad: true, none: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				who  string
				cert *tls.Certificate
				ok   bool
			}{{"a certificate of the trusted CA", &good, tc.want.good}, {"another CA's certificate", &bad, tc.want.bad}, {"no certificate", nil, tc.want.none}} {
				code, err := mtlsRequest(t, tc.dp, c.cert)
				switch {
				case c.ok && (err != nil || code != http.StatusNotFound):
					t.Errorf("%s: status %d, error %v; want the listener's 404", c.who, code, err)
				case !c.ok && err == nil:
					t.Errorf("%s: status %d; want the handshake refused", c.who, code)
				}
			}
		})
	}

	// Optional validation (Envoy's default without require_client_certificate):
	// none passes, a presented certificate must verify.
	gw := tlsGateway("a.example.com")
	gw.Listeners[0].TLS.ClientValidation = &model.ClientValidation{CACertificates: trusted.PEM}
	l, rc, secrets := tlsResources(t, gw)
	optional := mutateDownstreamTLS(t, l, func(d *tlsv3.DownstreamTlsContext) { d.RequireClientCertificate = nil })
	dp := newTestDP(t, dataplane.Options{})
	load(t, dp, append(rc, optional, secrets[0])...)
	if code, err := mtlsRequest(t, dp, nil); err != nil || code != http.StatusNotFound {
		t.Errorf("optional validation, no certificate: %d %v; want 404", code, err)
	}
	if code, err := mtlsRequest(t, dp, &good); err != nil || code != http.StatusNotFound {
		t.Errorf("optional validation, trusted certificate: %d %v; want 404", code, err)
	}
	if _, err := mtlsRequest(t, dp, &bad); err == nil {
		t.Error("optional validation, another CA's certificate: accepted; want the handshake refused")
	}
}

// mutateDownstreamTLS returns a copy of listener l whose first chain's
// DownstreamTlsContext f has changed.
func mutateDownstreamTLS(t *testing.T, l *listenerv3.Listener, f func(*tlsv3.DownstreamTlsContext)) *listenerv3.Listener {
	t.Helper()
	out := proto.Clone(l).(*listenerv3.Listener)
	ts := out.GetFilterChains()[0].GetTransportSocket()
	ts.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: editAny(t, ts.GetTypedConfig(), &tlsv3.DownstreamTlsContext{}, f)}
	return out
}

func inlineString(s string) *corev3.DataSource_InlineString {
	return &corev3.DataSource_InlineString{InlineString: s}
}

// TestClientValidationRefusals: validation options the data plane does not
// implement, and a CA bundle Envoy cannot load, are NACKed. Envoy refuses a
// trusted_ca that holds no certificate ("Failed to load trusted CA
// certificates from ...", parseCaCertList in source/common/tls/
// cert_validator/default_validator.cc); require_client_certificate
// without trusted_ca makes Envoy ask for no certificate at all
// (addClientValidationContext returns before setting
// SSL_VERIFY_FAIL_IF_NO_PEER_CERT), so it is refused here (stricter), as
// are SAN matchers and a validation context over SDS on a listener (not
// implemented).
func TestClientValidationRefusals(t *testing.T) {
	ca := certs.NewCA(t)
	gw := tlsGateway("a.example.com")
	gw.Listeners[0].TLS.ClientValidation = &model.ClientValidation{CACertificates: ca.PEM}
	l, _, _ := tlsResources(t, gw)
	for _, tc := range []struct {
		name   string
		mutate func(*tlsv3.DownstreamTlsContext)
		want   string
	}{
		{"trusted_ca without a certificate", func(d *tlsv3.DownstreamTlsContext) {
			d.GetCommonTlsContext().GetValidationContext().GetTrustedCa().Specifier = inlineString("not a certificate")
		}, "trusted CA"},
		{"SAN matchers", func(d *tlsv3.DownstreamTlsContext) {
			d.GetCommonTlsContext().GetValidationContext().MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{{SanType: tlsv3.SubjectAltNameMatcher_DNS}}
		}, "match_typed_subject_alt_names"},
		{"require_client_certificate without a CA", func(d *tlsv3.DownstreamTlsContext) {
			d.CommonTlsContext.ValidationContextType = nil
			d.RequireClientCertificate = wrapperspb.Bool(true)
		}, "require_client_certificate"},
		{"a validation context over SDS", func(d *tlsv3.DownstreamTlsContext) {
			d.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "ca"}}
		}, "validation_context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := anypb.New(mutateDownstreamTLS(t, l, tc.mutate))
			if err != nil {
				t.Fatal(err)
			}
			err = dataplane.Validate(a)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decode: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
