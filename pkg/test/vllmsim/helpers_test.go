// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// epoch is the fixed clock of every test server.
var epoch = time.Unix(1790053209, 0)

func fixedNow() time.Time { return epoch }

// seedConfig is the seed's pod: Llama 3.1 8B, one adapter, --max-loras 2.
func seedConfig(pod string) Config {
	return Config{
		PodName:  pod,
		Model:    "meta-llama/Llama-3.1-8B-Instruct",
		LoRAs:    []string{"reviews-1"},
		MaxLoRAs: 2,
		Now:      fixedNow,
	}
}

// client returns an HTTP client whose connections close when the test ends.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

type reply struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// do sends one request; hdr is pairs of header names and values.
func do(ctx context.Context, c *http.Client, method, url, body string, hdr ...string) reply {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return reply{err: err}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

// mustDo is do for the test goroutine: it fails the test on transport errors.
func mustDo(t *testing.T, c *http.Client, method, url, body string, hdr ...string) reply {
	t.Helper()
	r := do(t.Context(), c, method, url, body, hdr...)
	if r.err != nil {
		t.Fatalf("%s %s: %v", method, url, r.err)
	}
	return r
}

// async sends a request from a goroutine; its reply arrives on the channel.
func async(ctx context.Context, c *http.Client, method, url, body string, hdr ...string) <-chan reply {
	ch := make(chan reply, 1)
	go func() { ch <- do(ctx, c, method, url, body, hdr...) }()
	return ch
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, b, err)
	}
	return v
}

// sseEvents splits a Server-Sent Events body into its data payloads, checking
// that every event is exactly one "data: " line followed by a blank line.
func sseEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var events []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("SSE line %q is not a data line; body:\n%s", line, body)
		}
		if !sc.Scan() || sc.Text() != "" {
			t.Fatalf("SSE event %q not followed by a blank line; body:\n%s", data, body)
		}
		events = append(events, data)
	}
	return events
}

// waitFor waits, bounded, for cond on s's Stats.
func waitFor(t *testing.T, s *Server, what string, cond func(Stats) bool) Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := s.WaitUntil(ctx, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v; last stats %+v", what, err, st)
	}
	return st
}

// recv takes one reply, bounded, and fails on transport errors.
func recv(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("request failed: %v", r.err)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no reply within 10s")
		return reply{}
	}
}

func checkPodHeaders(t *testing.T, r reply, pod, port string) {
	t.Helper()
	if got := r.header.Get(PodHeader); got != pod {
		t.Errorf("%s = %q, want %q", PodHeader, got, pod)
	}
	if got := r.header.Get(PortHeader); got != port {
		t.Errorf("%s = %q, want %q", PortHeader, got, port)
	}
}
