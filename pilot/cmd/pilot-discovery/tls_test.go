// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/logbuf"
)

// TestCertReloader: a rotated pair is served without a restart; a broken
// rotation keeps the last good pair.
func TestCertReloader(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	r, err := newCertReloader(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := r.getCertificate(nil)
	rotated := t.TempDir()
	c2, k2 := writeSelfSigned(t, rotated)
	for _, p := range [][2]string{{c2, cert}, {k2, key}} {
		b, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Minute)
		if err := os.Chtimes(p[1], later, later); err != nil {
			t.Fatal(err)
		}
	}
	second, _ := r.getCertificate(nil)
	if string(second.Certificate[0]) == string(first.Certificate[0]) {
		t.Fatal("rotated certificate not picked up")
	}
	if err := os.WriteFile(cert, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)
	for range 3 { // three handshakes: one error logged, not three
		if third, _ := r.getCertificate(nil); third != second {
			t.Error("a broken rotation replaced the last good pair")
		}
	}
	if n := strings.Count(logs.String(), "ADS certificate reload failed"); n != 1 {
		t.Errorf("broken rotation logged %d times, want once:\n%s", n, logs.String())
	}
	if _, err := newCertReloader(cert, key); err == nil {
		t.Error("newCertReloader accepted a broken pair")
	}
}
