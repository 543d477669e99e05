// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/infermesh/infermesh/pkg/test/certs"
)

func TestBuildSecret(t *testing.T) {
	crt, key, err := certs.SelfSigned("a.example.com")
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cert"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": crt, "tls.key": key}}
	sec, err := BuildSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := sec.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	tc := sec.GetTlsCertificate()
	if sec.Name != "kubernetes-gateway://ns/cert" || !bytes.Equal(tc.GetCertificateChain().GetInlineBytes(), crt) ||
		!bytes.Equal(tc.GetPrivateKey().GetInlineBytes(), key) {
		t.Errorf("BuildSecret = %s with chain %d bytes, key %d bytes", sec.Name, len(tc.GetCertificateChain().GetInlineBytes()), len(tc.GetPrivateKey().GetInlineBytes()))
	}
	if k, ok := SecretKey(sec.Name); !ok || k != "ns/cert" {
		t.Errorf("SecretKey(%s) = %q, %v", sec.Name, k, ok)
	}
	for _, bad := range []string{"kubernetes://ns/cert", "kubernetes-gateway://ns", "kubernetes-gateway:///cert", "kubernetes-gateway://ns/a/b"} {
		if k, ok := SecretKey(bad); ok {
			t.Errorf("SecretKey(%q) = %q, want not ours", bad, k)
		}
	}

	s.Type = corev1.SecretTypeOpaque
	if _, err := BuildSecret(s); err == nil {
		t.Error("an Opaque Secret was built")
	}
	s.Type = corev1.SecretTypeTLS
	s.Data["tls.key"] = []byte("-----BEGIN EC PRIVATE KEY-----\nnot a key\n-----END EC PRIVATE KEY-----\n")
	_, err = BuildSecret(s)
	if err == nil || bytes.Contains([]byte(err.Error()), []byte("not a key")) {
		t.Errorf("a broken key: error %v (must exist and not quote the key)", err)
	}
}
