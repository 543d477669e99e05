// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// compileUpstreamTLS compiles an UpstreamTlsContext: the server
// name, ALPN, server verification, and the client certificate's SDS name
// (one tls_certificate_sds_secret_configs entry over ADS, fetched as a
// listener's: Envoy's cluster waits for it, source/common/secret/sds_api.cc
// being an init target of the cluster's transport socket factory).
func compileUpstreamTLS(ts *corev3.TransportSocket) (*tls.Config, string, error) {
	if ts.GetName() != transportSocketTLS {
		return nil, "", fmt.Errorf("transport socket %q not implemented", ts.GetName())
	}
	var u tlsv3.UpstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&u); err != nil {
		return nil, "", err
	}
	var sdsName string
	switch sds := u.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs(); {
	case len(sds) > 1:
		return nil, "", fmt.Errorf("exactly one client certificate (tls_certificate_sds_secret_configs) is implemented upstream, got %d", len(sds))
	case len(sds) == 1:
		src := sds[0].GetSdsConfig()
		if src.GetAds() == nil {
			return nil, "", errors.New("the client certificate's SDS secret must come over ADS")
		}
		if t := src.GetInitialFetchTimeout(); t != nil && t.AsDuration() != 0 {
			return nil, "", errors.New("sds_config.initial_fetch_timeout other than 0 not implemented")
		}
		sdsName = sds[0].GetName()
	}
	cfg, err := upstreamServerVerification(&u)
	return cfg, sdsName, err
}

// upstreamServerVerification is the tls.Config of u without its client
// certificate: sni, ALPN, and the server certificate verified as Envoy
// does: against trusted_ca and the subject alternative name matchers only
// (never against sni), and not at all without a validation context.
func upstreamServerVerification(u *tlsv3.UpstreamTlsContext) (*tls.Config, error) {
	cfg := &tls.Config{
		ServerName:         u.GetSni(),
		NextProtos:         u.GetCommonTlsContext().GetAlpnProtocols(),
		InsecureSkipVerify: true, // verification below, Envoy's way
		MinVersion:         tls.VersionTLS12,
	}
	vc := u.GetCommonTlsContext().GetValidationContext()
	if vc == nil {
		return cfg, nil
	}
	var pem []byte
	var err error
	if vc.GetTrustedCa() != nil {
		if pem, err = dataSourceBytes(vc.GetTrustedCa()); err != nil {
			return nil, fmt.Errorf("trusted_ca: %w", err)
		}
		if len(pem) == 0 {
			// Envoy reads a trusted_ca that is set as non-empty data
			// (CertificateValidationContextConfigImpl::create,
			// envoy.reloadable_features.reject_empty_trusted_ca_file); an
			// empty one would otherwise verify nothing.
			return nil, errors.New("trusted_ca: DataSource cannot be empty")
		}
	}
	var pool *x509.CertPool
	if len(pem) > 0 {
		if pool, err = trustedCAPool(pem); err != nil {
			return nil, fmt.Errorf("trusted_ca: %w", err)
		}
	}
	// SAN matchers (source/common/tls/cert_validator/default_validator.cc,
	// matchSubjectAltName; san_matcher.cc): the certificate passes when
	// any matcher matches any SAN of its type. DNS and URI exact only, each
	// compared with the SAN's bytes as the certificate carries them
	// (Utility::generalNameAsString), never with a parsed and re-printed
	// URL, which would lower-case a URI's scheme and drop an empty fragment.
	var sans, uris []string
	for _, m := range vc.GetMatchTypedSubjectAltNames() {
		exact := m.GetMatcher().GetExact()
		switch {
		case exact == "":
			return nil, errors.New("match_typed_subject_alt_names: only exact matchers are implemented")
		case m.GetSanType() == tlsv3.SubjectAltNameMatcher_DNS:
			sans = append(sans, exact)
		case m.GetSanType() == tlsv3.SubjectAltNameMatcher_URI:
			uris = append(uris, exact)
		default:
			return nil, fmt.Errorf("match_typed_subject_alt_names: san_type %v not implemented (only DNS and URI)", m.GetSanType())
		}
	}
	if pool == nil && len(sans)+len(uris) > 0 {
		// Envoy refuses the context (CertificateValidationContextConfigImpl::
		// initialize, source/common/ssl/certificate_validation_context_config_impl.cc).
		return nil, errors.New("SAN-based verification of peer certificates without trusted CA is insecure and not allowed")
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("no server certificate")
		}
		if pool != nil {
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter}); err != nil {
				return err
			}
		}
		if len(sans) == 0 && len(uris) == 0 {
			return nil
		}
		leaf := cs.PeerCertificates[0]
		for _, want := range sans {
			if slices.Contains(leaf.DNSNames, want) {
				return nil
			}
		}
		if len(uris) > 0 {
			for _, got := range rawURISANs(leaf) {
				if slices.Contains(uris, got) {
					return nil
				}
			}
		}
		return fmt.Errorf("server certificate matches none of the subject alternative names %v %v", sans, uris)
	}
	return cfg, nil
}

// oidSubjectAltName is the subjectAltName extension (RFC 5280 4.2.1.6).
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// rawURISANs are c's uniformResourceIdentifier subject alternative names
// as their bytes stand in the certificate (crypto/x509 keeps only parsed
// URLs); none when the extension does not parse.
func rawURISANs(c *x509.Certificate) []string {
	for _, e := range c.Extensions {
		if !e.Id.Equal(oidSubjectAltName) {
			continue
		}
		var seq asn1.RawValue
		if rest, err := asn1.Unmarshal(e.Value, &seq); err != nil || len(rest) > 0 || !seq.IsCompound {
			return nil
		}
		var out []string
		for b := seq.Bytes; len(b) > 0; {
			var gn asn1.RawValue
			var err error
			if b, err = asn1.Unmarshal(b, &gn); err != nil {
				return nil
			}
			if gn.Class == asn1.ClassContextSpecific && gn.Tag == 6 { // uniformResourceIdentifier [6] IA5String
				out = append(out, string(gn.Bytes))
			}
		}
		return out
	}
	return nil
}
