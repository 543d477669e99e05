// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	corev1 "k8s.io/api/core/v1"
)

// SecretPrefix starts the SDS name of a Gateway listener's certificate,
// as Istio names Gateway API certificateRefs
// (pilot/pkg/model/credentials: kubernetes-gateway://<namespace>/<name>).
const SecretPrefix = "kubernetes-gateway://"

// SecretName is the SDS resource name of the Secret key ("namespace/name").
func SecretName(key string) string { return SecretPrefix + key }

// SecretKey is the Secret key ("namespace/name") of an SDS name made by
// SecretName; false for any other name.
func SecretKey(sdsName string) (string, bool) {
	key, ok := strings.CutPrefix(sdsName, SecretPrefix)
	if !ok {
		return "", false
	}
	ns, name, ok := strings.Cut(key, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return key, true
}

// CheckTLSSecret reports why s cannot serve as a listener's certificate:
// its type must be kubernetes.io/tls, tls.crt a PEM certificate chain and
// tls.key the PEM private key of its first certificate (the checks Envoy
// makes when it loads a TlsCertificate). The error never quotes the data.
func CheckTLSSecret(s *corev1.Secret) error {
	if s.Type != corev1.SecretTypeTLS {
		return fmt.Errorf("type is %q, want %q", s.Type, corev1.SecretTypeTLS)
	}
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	switch {
	case len(crt) == 0:
		return fmt.Errorf("no %s", corev1.TLSCertKey)
	case len(key) == 0:
		return fmt.Errorf("no %s", corev1.TLSPrivateKeyKey)
	}
	if _, err := tls.X509KeyPair(crt, key); err != nil {
		// crypto/tls's messages say what is wrong (no PEM data, a key that
		// does not match the certificate) without the bytes.
		return fmt.Errorf("%s and %s are not a valid certificate and private key: %v", corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
	}
	return nil
}

// ParseCABundle checks a CA bundle before it is inlined as trusted_ca
// (CertificateValidationContext), for an upstream cluster (BackendTLSPolicy,
// DestinationRule) and for a listener's client validation alike: data must
// hold at least one PEM block, every block must decode, be of type
// CERTIFICATE and parse with crypto/x509. The result is the certificates
// re-encoded, one PEM block each, so what a proxy loads is exactly what was
// checked (text around the blocks, such as the comments of a system bundle,
// is dropped).
//
// Envoy loads trusted_ca as a whole (source/common/tls/cert_validator/
// default_validator.cc, DefaultCertValidator::initializeSslContexts, with
// BoringSSL's PEM_X509_INFO_read_bio): one block it cannot read fails with
// "Failed to load trusted CA certificates", which refuses the cluster or
// listener and with it the whole CDS or LDS update of a Gateway every
// tenant shares. A bad block is therefore refused here, naming its
// position, rather than handed on or silently left out. Stricter than
// Envoy: a block of another type (Envoy would also load an X509 CRL) is
// refused too.
func ParseCABundle(data []byte) ([]byte, error) {
	var out bytes.Buffer
	rest := data
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is %q, not CERTIFICATE", n, b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("PEM block %d is not a certificate: %v", n, err)
		}
		if err := pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}); err != nil {
			return nil, err
		}
	}
	// encoding/pem skips a block it cannot decode (a line that is not
	// base64, a missing END line) and goes on with the next: count the
	// BEGIN lines, so that such a block is an error, not a certificate
	// silently left out.
	if begins := bytes.Count(data, []byte("-----BEGIN ")); begins > n {
		return nil, fmt.Errorf("%d of %d PEM blocks do not decode (not base64, or no END line)", begins-n, begins)
	}
	if out.Len() == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out.Bytes(), nil
}

// BuildSecret is the SDS resource (envoy.extensions.transport_sockets.tls.v3.Secret)
// of the Secret s, named SecretName(namespace/name): a TlsCertificate with
// tls.crt as certificate_chain and tls.key as private_key, inline. It
// fails when s is not a usable kubernetes.io/tls Secret (CheckTLSSecret).
func BuildSecret(s *corev1.Secret) (*tlsv3.Secret, error) {
	if err := CheckTLSSecret(s); err != nil {
		return nil, fmt.Errorf("kubernetes.io/tls secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return &tlsv3.Secret{
		Name: SecretName(s.Namespace + "/" + s.Name),
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.Data[corev1.TLSCertKey]}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.Data[corev1.TLSPrivateKeyKey]}},
		}},
	}, nil
}

// SecretNames are the SDS names the listeners' filter chains and the
// clusters fetch (tls_certificate_sds_secret_configs of their
// DownstreamTlsContexts and UpstreamTlsContexts), sorted and unique.
func SecretNames(listeners []*listenerv3.Listener, clusters []*clusterv3.Cluster) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, c := range clusters {
		ts := c.GetTransportSocket()
		if ts == nil {
			continue
		}
		var ctx tlsv3.UpstreamTlsContext
		if err := ts.GetTypedConfig().UnmarshalTo(&ctx); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c.GetName(), err)
		}
		for _, s := range ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
			if !seen[s.GetName()] {
				seen[s.GetName()] = true
				out = append(out, s.GetName())
			}
		}
	}
	for _, l := range listeners {
		for _, fc := range l.GetFilterChains() {
			ts := fc.GetTransportSocket()
			if ts == nil {
				continue
			}
			var ctx tlsv3.DownstreamTlsContext
			if err := ts.GetTypedConfig().UnmarshalTo(&ctx); err != nil {
				return nil, fmt.Errorf("listener %s filter chain %s: %w", l.GetName(), fc.GetName(), err)
			}
			for _, c := range ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
				if !seen[c.GetName()] {
					seen[c.GetName()] = true
					out = append(out, c.GetName())
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
