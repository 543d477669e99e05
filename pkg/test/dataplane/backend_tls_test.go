// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/test/certs"
)

// tlsBackend is an HTTPS server on loopback with cert, answering with the
// SNI it was sent in header x-seen-sni.
func tlsBackend(t *testing.T, cert tls.Certificate) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-seen-sni", r.TLS.ServerName)
		_, _ = io.WriteString(w, "tls-backend")
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// serviceBackendResources translates a Gateway with one HTTP listener on
// 80 whose one route sends everything to svc, its cluster's one endpoint
// 10.0.0.1:8443, and clientCert as the Gateway's backend client
// certificate ("" for none).
func serviceBackendResources(t *testing.T, svc *model.ServiceBackend, clientCert string) core.Resources {
	t.Helper()
	gw := model.Gateway{Namespace: "ns", Name: "gw", BackendClientCertificate: clientCert, Listeners: []model.Listener{{Name: "http", Port: 80,
		Protocol: gwv1.HTTPProtocolType, Routes: []*model.Route{{Kind: "HTTPRoute", Namespace: "ns", Name: "r",
			CreationTimestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			Rules:             []model.Rule{{HTTP: &gwv1.HTTPRouteRule{}, Backends: []model.Backend{{Weight: 1, Service: svc}}}}}}}}}
	res, err := core.BuildGateway(&gw, core.Inputs{Endpoints: map[string][]core.Endpoint{
		core.ClusterName(uint32(svc.Port), svc.Host): {{Address: "10.0.0.1", Port: 8443}},
	}}, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestServiceBackendTLS checks TLS to a Service backend as a
// BackendTLSPolicy asks it (ServiceBackend.TLS, translated by core into the
// cluster's UpstreamTlsContext), through the data plane's upstream TLS,
// which follows Envoy's (source/common/tls/cert_validator/
// default_validator.cc: the chain against trusted_ca, then
// match_typed_subject_alt_names, any matcher matching any SAN of its type;
// UpstreamTlsContext.sni sent as the server name). A backend whose
// certificate fails is a connection failure, 503 (Envoy's
// upstream_reset_before_response_started{connection_failure}); a backend
// whose CA the Gateway cannot have (a credentialName read only in another
// namespace) is 500 without a connection. (An invalid policy never reaches
// the model: the controller makes the backend invalid,
// TestEndToEndUpstreamTLSFailsClosed.)
func TestServiceBackendTLS(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	const host = "tls-backend.ns.svc.cluster.local"
	for _, tc := range []struct {
		name string
		cert tls.Certificate
		tls  *model.EPPTLS
		want int
	}{
		{"hostname is SNI and SAN", ca.serverCert(t, "abc.example.com"),
			&model.EPPTLS{SNI: "abc.example.com", CACertificates: ca.pem, SubjectAltNames: []string{"abc.example.com"}}, 200},
		{"certificate for another name", ca.serverCert(t, "other.example.com"),
			&model.EPPTLS{SNI: "abc.example.com", CACertificates: ca.pem, SubjectAltNames: []string{"abc.example.com"}}, 503},
		{"certificate of another CA", other.serverCert(t, "abc.example.com"),
			&model.EPPTLS{SNI: "abc.example.com", CACertificates: ca.pem, SubjectAltNames: []string{"abc.example.com"}}, 503},
		{"URI SAN matches", ca.serverCertWithURIs(t, []string{"spiffe://abc.example.com/test-identity"}, "abc.example.com"),
			&model.EPPTLS{SNI: "abc.example.com", CACertificates: ca.pem, URISubjectAltNames: []string{"spiffe://abc.example.com/test-identity"}}, 200},
		{"URI SAN differs", ca.serverCertWithURIs(t, []string{"spiffe://abc.example.com/test-identity"}, "abc.example.com"),
			&model.EPPTLS{SNI: "abc.example.com", CACertificates: ca.pem, URISubjectAltNames: []string{"spiffe://def.example.com/test-identity"}}, 503},
		{"one of a DNS and a URI SAN", ca.serverCert(t, "abc.example.com"),
			&model.EPPTLS{SNI: "abc.example.com", CACertificates: ca.pem, SubjectAltNames: []string{"abc.example.com"},
				URISubjectAltNames: []string{"spiffe://def.example.com/x"}}, 200},
		{"a credentialName CA read in another namespace only", ca.serverCert(t, "abc.example.com"),
			&model.EPPTLS{SNI: "abc.example.com", CredentialName: "cred", CredentialCAs: map[string]model.CredentialCA{"other": {PEM: ca.pem}}}, 500},
		{"a credentialName CA read in the Gateway's namespace", ca.serverCert(t, "abc.example.com"),
			&model.EPPTLS{SNI: "abc.example.com", CredentialName: "cred", CredentialCAs: map[string]model.CredentialCA{"ns": {PEM: ca.pem}}}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := tlsBackend(t, tc.cert)
			svc := &model.ServiceBackend{Host: host, Port: 443, TLS: tc.tls}
			if tc.tls != nil {
				svc.TLS.Host = host
			}
			res := serviceBackendResources(t, svc, "")
			dp := newTestDP(t, Options{Dial: redirect(map[string]string{"10.0.0.1:8443": be.Listener.Addr().String()})})
			load(t, dp, resourcesOf(res)...)
			resp := get(t, dp, 80, "GET", "any.example.com", "/", nil)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d (%q), want %d", resp.StatusCode, bodyOf(resp), tc.want)
			}
			if tc.want == 200 && resp.Header.Get("x-seen-sni") != "abc.example.com" {
				t.Errorf("backend saw SNI %q, want the policy's hostname", resp.Header.Get("x-seen-sni"))
			}
		})
	}
}

// TestServiceBackendClientCertificate checks the Gateway's backend client
// certificate (spec.tls.backend.clientCertificateRef, translated by core
// into the cluster's tls_certificate_sds_secret_configs) through the data
// plane, as Envoy handles an upstream SDS certificate: the cluster does not
// serve before its secret arrives (the SDS subscription is an init target
// of the cluster, source/common/secret/sds_api.cc), the certificate is
// presented to a backend that asks for one, and a new version of the
// secret is presented by the next connection.
func TestServiceBackendClientCertificate(t *testing.T) {
	ca := newTestCA(t)
	const host = "tls-backend.ns.svc.cluster.local"
	clientSecret := func(cn string) (*tlsv3.Secret, *x509.Certificate) {
		t.Helper()
		crt, key, err := certs.SelfSignedClient(cn, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := core.BuildSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "client"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": crt, "tls.key": key}})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(mustPEMBlock(t, crt))
		if err != nil {
			t.Fatal(err)
		}
		return s, leaf
	}
	first, firstLeaf := clientSecret("first")
	second, secondLeaf := clientSecret("second")
	pool := x509.NewCertPool()
	pool.AddCert(firstLeaf)
	pool.AddCert(secondLeaf)
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-seen-client", r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	be.TLS = &tls.Config{Certificates: []tls.Certificate{ca.serverCert(t, "abc.example.com")}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	be.StartTLS()
	t.Cleanup(be.Close)

	svc := &model.ServiceBackend{Host: host, Port: 443, TLS: &model.EPPTLS{Host: host, SNI: "abc.example.com", CACertificates: ca.pem}}
	res := serviceBackendResources(t, svc, "ns/client")
	if names, err := core.SecretNames(res.Listeners, res.Clusters); err != nil || len(names) != 1 || names[0] != first.GetName() {
		t.Fatalf("SDS names %v %v, want the client certificate's", names, err)
	}
	dp := newTestDP(t, Options{Dial: redirect(map[string]string{"10.0.0.1:8443": be.Listener.Addr().String()})})
	load(t, dp, resourcesOf(res)...)
	if _, ok := dp.Snapshot().Clusters[core.ClusterName(443, host)]; ok {
		t.Fatal("the cluster is active before its client certificate arrived")
	}
	load(t, dp, first)
	if resp := get(t, dp, 80, "GET", "any.example.com", "/", nil); resp.StatusCode != http.StatusOK || resp.Header.Get("x-seen-client") != "first" {
		t.Fatalf("status %d, backend saw client %q; want 200 with the first certificate", resp.StatusCode, resp.Header.Get("x-seen-client"))
	}
	load(t, dp, second)
	dp.mu.Lock()
	for _, rt := range dp.clusters {
		rt.close() // new connections from here on
	}
	dp.mu.Unlock()
	if resp := get(t, dp, 80, "GET", "any.example.com", "/", nil); resp.StatusCode != http.StatusOK || resp.Header.Get("x-seen-client") != "second" {
		t.Fatalf("after rotation: status %d, backend saw client %q; want the second certificate", resp.StatusCode, resp.Header.Get("x-seen-client"))
	}
}

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
	ca, other := newTestCA(t), newTestCA(t)
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
	upperScheme := ca.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "server"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		URIs: []*url.URL{{Scheme: "SPIFFE", Host: "abc.example.com", Path: "/id"}}})
	for _, tc := range []struct {
		name     string
		ca       []byte
		matchers []*tlsv3.SubjectAltNameMatcher
		cert     tls.Certificate
		ok       bool
	}{
		{"chain only, a certificate for another name than sni", ca.pem, nil, ca.serverCert(t, "other.example.com"), true},
		{"chain only, another CA", ca.pem, nil, other.serverCert(t, "abc.example.com"), false},
		{"DNS matcher", ca.pem, []*tlsv3.SubjectAltNameMatcher{dns("abc.example.com")}, ca.serverCert(t, "abc.example.com"), true},
		{"DNS matcher, another name", ca.pem, []*tlsv3.SubjectAltNameMatcher{dns("abc.example.com")}, ca.serverCert(t, "other.example.com"), false},
		{"URI matcher", ca.pem, []*tlsv3.SubjectAltNameMatcher{uri("spiffe://abc.example.com/id")},
			ca.serverCertWithURIs(t, []string{"spiffe://abc.example.com/id"}), true},
		{"URI matcher, the SAN's scheme in upper case", ca.pem, []*tlsv3.SubjectAltNameMatcher{uri("spiffe://abc.example.com/id")}, upperScheme, false},
		{"URI matcher, a DNS SAN of the same text", ca.pem, []*tlsv3.SubjectAltNameMatcher{uri("abc.example.com")}, ca.serverCert(t, "abc.example.com"), false},
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
		if _, err := compile(append(slices.Clone(ca.pem), bad...)); err == nil || !strings.Contains(err.Error(), "failed to load trusted CA certificates") {
			t.Errorf("a good CA followed by %q: %v, want the bundle refused", bad, err)
		}
	}
	if _, err := compile(append([]byte("# a comment Envoy skips\n"), ca.pem...)); err != nil {
		t.Errorf("a CA after a comment line: %v", err)
	}
}
