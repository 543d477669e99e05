// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package netns tests kubeenv.NewNetNS: a pod address in its own network
// namespace, served from inside and reached from the host. It needs root and
// iproute2, and fails (never skips) without them.
package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// The addresses of this package's namespaces: 10.244.30.0/24, which no other
// integration package uses, so packages can run at once (`go test -p 2`;
// pilot/gie uses 10.244.0.x, epp 10.244.31.x).
const (
	// podAddr is the only non-loopback address this test sends traffic to.
	podAddr = "10.244.30.13"
	// takenAddr is routed by one namespace and then claimed by another.
	takenAddr = "10.244.30.14"
)

func TestServerInNamespaceIsReachableAndCleanedUp(t *testing.T) {
	name := fmt.Sprintf("kubeenv-netns-test-%d", time.Now().UnixNano()%1e6)
	t.Run("serve", func(t *testing.T) {
		ns := kubeenv.NewNetNS(t, name, podAddr)
		if got := netnsList(t); !strings.Contains(got, name) {
			t.Fatalf("ip netns list lacks %s:\n%s", name, got)
		}
		l, err := ns.Listen("tcp", podAddr+":8000")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "pod %s saw %s", r.Context().Value(http.LocalAddrContextKey), r.RemoteAddr)
			}),
			ReadHeaderTimeout: 5 * time.Second,
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		t.Cleanup(func() { // runs before NewNetNS's cleanup
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Error(err)
			}
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Error(err)
			}
		})

		// The same address is not bound on the host: only the namespace has it.
		if hl, err := net.Listen("tcp", podAddr+":0"); err == nil {
			hl.Close()
			t.Fatalf("%s is bindable on the host; it should live only in the namespace", podAddr)
		}

		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get("http://" + podAddr + ":8000/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "pod "+podAddr+":8000 saw ") {
			t.Fatalf("GET: %d %q", resp.StatusCode, body)
		}
		t.Logf("GET http://%s:8000/ from the host: %s", podAddr, body)
	})
	if got := netnsList(t); strings.Contains(got, name) {
		t.Errorf("namespace %s still listed after cleanup:\n%s", name, got)
	}
	out, _ := exec.Command("ip", "route", "show", podAddr).CombinedOutput()
	if strings.TrimSpace(string(out)) != "" {
		t.Errorf("host route to %s left after cleanup: %s", podAddr, out)
	}
}

func netnsList(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	return string(out)
}

// TestFailedSetupIsCleanedUp makes NewNetNS fail half-way (a second namespace
// claims an address the first one already routes) and checks that the failure
// names the step and that the cleanup still deletes the half-built namespace.
func TestFailedSetupIsCleanedUp(t *testing.T) {
	suffix := time.Now().UnixNano() % 1e6
	first := kubeenv.NewNetNS(t, fmt.Sprintf("kubeenv-netns-a-%d", suffix), takenAddr)
	second := fmt.Sprintf("kubeenv-netns-b-%d", suffix)

	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		kubeenv.NewNetNS(rec, second, first.Addrs[0].String())
	}()
	<-done
	if !rec.fatal || !strings.Contains(strings.Join(rec.msgs, "\n"), "route add "+takenAddr+"/32") {
		t.Fatalf("NewNetNS with a taken address: fatal %v, messages %q", rec.fatal, rec.msgs)
	}
	t.Logf("the failure as a test sees it: %s", rec.msgs[0])
	if got := netnsList(t); !strings.Contains(got, second) {
		t.Fatalf("the half-built namespace %s is not there before cleanup:\n%s", second, got)
	}
	for i := len(rec.cleanups) - 1; i >= 0; i-- {
		rec.cleanups[i]()
	}
	if got := netnsList(t); strings.Contains(got, second) {
		t.Errorf("namespace %s still listed after cleanup:\n%s", second, got)
	}
	if len(rec.msgs) != 1 {
		t.Errorf("cleanup reported errors: %q", rec.msgs[1:])
	}
}

// recordingTB records what NewNetNS reports instead of failing t, and holds
// its cleanups for the test to run.
type recordingTB struct {
	testing.TB
	fatal    bool
	msgs     []string
	cleanups []func()
}

func (r *recordingTB) Helper()           {}
func (r *recordingTB) Cleanup(fn func()) { r.cleanups = append(r.cleanups, fn) }
func (r *recordingTB) Error(args ...any) { r.msgs = append(r.msgs, fmt.Sprint(args...)) }
func (r *recordingTB) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Fatal(args ...any) {
	r.Error(args...)
	r.fatal = true
	runtime.Goexit()
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatal = true
	runtime.Goexit()
}
