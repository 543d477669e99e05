// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestRedact follows Envoy's MessageUtil::redact: a sensitive field
// (TlsCertificate.private_key) and all under it read "[redacted]" (strings
// and bytes); fields that are not sensitive are kept; an Any is redacted
// inside.
func TestRedact(t *testing.T) {
	inline := func(b string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte(b)}}
	}
	sec := &tlsv3.Secret{Name: "kubernetes-gateway://ns/cert", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline("CHAIN"),
		PrivateKey:       inline("KEY"),
		Password:         &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/password"}},
	}}}
	Redact(sec)
	tc := sec.GetTlsCertificate()
	if got := string(tc.GetPrivateKey().GetInlineBytes()); got != "[redacted]" {
		t.Errorf("private_key = %q", got)
	}
	if got := tc.GetPassword().GetFilename(); got != "[redacted]" {
		t.Errorf("password.filename = %q (a string under a sensitive field)", got)
	}
	if got := string(tc.GetCertificateChain().GetInlineBytes()); got != "CHAIN" || sec.Name != "kubernetes-gateway://ns/cert" {
		t.Errorf("certificate_chain = %q, name %q: not sensitive, must be kept", got, sec.Name)
	}

	// Inside an Any: a listener's inline certificate.
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{
		CertificateChain: inline("CHAIN"), PrivateKey: inline("KEY"),
	}}}}
	a, err := anypb.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts := &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
	Redact(ts)
	var got tlsv3.DownstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&got); err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(ctx).(*tlsv3.DownstreamTlsContext)
	want.CommonTlsContext.TlsCertificates[0].PrivateKey = inline("[redacted]")
	if !proto.Equal(&got, want) {
		t.Errorf("redacted Any = %v, want %v", &got, want)
	}
}
