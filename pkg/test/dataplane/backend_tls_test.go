// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/certs"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestUpstreamTLSVerificationAsEnvoy checks the server verification of an
// UpstreamTlsContext against Envoy's default validator
// (source/common/tls/cert_validator/default_validator.cc: doVerifyCertChain
// against trusted_ca, then matchSubjectAltName; san_matcher.cc; the
// CertificateValidationContext API reference):
//
//   - without SAN matchers only the chain is verified: the certificate's
//     names are never compared with sni (no auto_san_validation);
//   - a URI matcher compares the SAN as the certificate carries it
//     (Utility::generalNameAsString), so "SPIFFE://..." is not
//     "spiffe://...", though a parsed URL would print both alike;
//   - SAN matchers without trusted_ca are refused ("SAN-based verification
//     of peer certificates without trusted CA is insecure and not allowed",
//     CertificateValidationContextConfigImpl::initialize in
//     source/common/ssl/certificate_validation_context_config_impl.cc), as
//     are an empty trusted_ca (CertificateValidationContextConfigImpl::create,
//     reject_empty_trusted_ca_file) and one without a certificate
//     (parseCaCertList, "Failed to load trusted CA certificates");
//   - a good certificate followed by a block BoringSSL's
//     PEM_X509_INFO_read_bio cannot read (not base64, a certificate that
//     does not parse) is refused as a whole, as
//     DefaultCertValidator::initializeSslContexts does, never loaded with
//     the bad block left out (trustedCAPool).
func TestUpstreamTLSVerificationAsEnvoy(t *testing.T) {
	ca, other := certs.NewCA(t), certs.NewCA(t)
	dns := func(n string) *tlsv3.SubjectAltNameMatcher {
		return &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_DNS,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: n}}}
	}
	uri := func(u string) *tlsv3.SubjectAltNameMatcher {
		return &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_URI,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: u}}}
	}
	compile := func(caPEM []byte, matchers ...*tlsv3.SubjectAltNameMatcher) (*tls.Config, error) {
		t.Helper()
		vc := &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: matchers}
		if caPEM != nil {
			vc.TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: caPEM}}
		}
		a, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: "abc.example.com", CommonTlsContext: &tlsv3.CommonTlsContext{
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := compileUpstreamTLS(&corev3.TransportSocket{Name: transportSocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}})
		return cfg, err
	}
	verify := func(cfg *tls.Config, cert tls.Certificate) error {
		t.Helper()
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return cfg.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}})
	}
	upperScheme := ca.Issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "server"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		URIs: []*url.URL{{Scheme: "SPIFFE", Host: "abc.example.com", Path: "/id"}}})
	for _, tc := range []struct {
		name     string
		ca       []byte
		matchers []*tlsv3.SubjectAltNameMatcher
		cert     tls.Certificate
		ok       bool
	}{
		{"chain only, a certificate for another name than sni", ca.PEM, nil, ca.ServerCert(t, "other.example.com"), true},
		{"chain only, another CA", ca.PEM, nil, other.ServerCert(t, "abc.example.com"), false},
		{"DNS matcher", ca.PEM, []*tlsv3.SubjectAltNameMatcher{dns("abc.example.com")}, ca.ServerCert(t, "abc.example.com"), true},
		{"DNS matcher, another name", ca.PEM, []*tlsv3.SubjectAltNameMatcher{dns("abc.example.com")}, ca.ServerCert(t, "other.example.com"), false},
		{"URI matcher", ca.PEM, []*tlsv3.SubjectAltNameMatcher{uri("spiffe://abc.example.com/id")},
			ca.ServerCertWithURIs(t, []string{"spiffe://abc.example.com/id"}), true},
		{"URI matcher, the SAN's scheme in upper case", ca.PEM, []*tlsv3.SubjectAltNameMatcher{uri("spiffe://abc.example.com/id")}, upperScheme, false},
		{"URI matcher, a DNS SAN of the same text", ca.PEM, []*tlsv3.SubjectAltNameMatcher{uri("abc.example.com")}, ca.ServerCert(t, "abc.example.com"), false},
	} {
		cfg, err := compile(tc.ca, tc.matchers...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := verify(cfg, tc.cert); (err == nil) != tc.ok {
			t.Errorf("%s: verification error %v, want accepted %v", tc.name, err, tc.ok)
		}
	}
	if _, err := compile(nil, dns("abc.example.com")); err == nil || !strings.Contains(err.Error(), "without trusted CA is insecure") {
		t.Errorf("SAN matchers without trusted_ca: %v, want Envoy's refusal", err)
	}
	if _, err := compile([]byte("not a certificate"), dns("abc.example.com")); err == nil {
		t.Error("a trusted_ca without a certificate was accepted")
	}
	if _, err := compile([]byte{}); err == nil {
		t.Error("an empty trusted_ca was accepted (and would verify nothing)")
	}
	notBase64 := "-----BEGIN CERTIFICATE-----\n!!not base64!!\n-----END CERTIFICATE-----\n"
	notACert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("garbage")}))
	for _, bad := range []string{notBase64, notACert} {
		if _, err := compile(append(slices.Clone(ca.PEM), bad...)); err == nil || !strings.Contains(err.Error(), "failed to load trusted CA certificates") {
			t.Errorf("a good CA followed by %q: %v, want the bundle refused", bad, err)
		}
	}
	if _, err := compile(append([]byte("# a comment Envoy skips\n"), ca.PEM...)); err != nil {
		t.Errorf("a CA after a comment line: %v", err)
	}
}
