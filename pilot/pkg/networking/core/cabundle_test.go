// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"encoding/pem"
	"strings"
	"testing"

	"github.com/infermesh/infermesh/pkg/test/certs"
)

func TestParseCABundle(t *testing.T) {
	one, two := certs.CertPEM(t, "one"), certs.CertPEM(t, "two")
	key := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("k")}))
	for _, tc := range []struct {
		name, in, want, wantErr string
	}{
		{name: "one certificate", in: one, want: one},
		{name: "two, with comments around them and no final newline", in: "# Issuer: one\n" + one + "# Issuer: two\n" + strings.TrimSuffix(two, "\n"),
			want: one + two},
		{name: "a CERTIFICATE block with garbage inside", in: certs.NotACertificatePEM("not a certificate"), wantErr: "PEM block 1 is not a certificate"},
		{name: "garbage after a good certificate", in: one + certs.NotACertificatePEM("x"), wantErr: "PEM block 2 is not a certificate"},
		{name: "another block type", in: one + key, wantErr: `PEM block 2 is "PRIVATE KEY", not CERTIFICATE`},
		{name: "no PEM at all", in: "hello", wantErr: "no PEM certificate"},
		{name: "empty", in: "", wantErr: "no PEM certificate"},
		{name: "a truncated block", in: strings.TrimSuffix(one, "-----END CERTIFICATE-----\n"), wantErr: "1 of 1 PEM blocks do not decode"},
		{name: "a truncated block after a good one", in: one + strings.TrimSuffix(two, "-----END CERTIFICATE-----\n"), wantErr: "1 of 2 PEM blocks do not decode"},
		{name: "a block that is not base64 after a good one", in: one + "-----BEGIN CERTIFICATE-----\n!!not base64!!\n-----END CERTIFICATE-----\n",
			wantErr: "1 of 2 PEM blocks do not decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCABundle([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q (got %q)", err, tc.wantErr, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
