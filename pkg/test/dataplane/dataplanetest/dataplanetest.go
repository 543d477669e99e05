// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplanetest

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/infermesh/infermesh/pkg/bootstrap"
)

// Bootstrap is pkg/bootstrap's JSON for the seed Gateway (node gw-0),
// plaintext ADS at addr; delta switches ads_config.api_type to
// DELTA_GRPC.
func Bootstrap(t testing.TB, addr string, delta bool) []byte {
	t.Helper()
	b, err := bootstrap.JSON(bootstrap.Config{
		NodeID: "gw-0", Cluster: "gateway", GatewayNamespace: "gateway-namespace", GatewayName: "gateway",
		XDSAddress: addr, Plaintext: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !delta {
		return b
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["dynamic_resources"].(map[string]any)["ads_config"].(map[string]any)["api_type"] = "DELTA_GRPC"
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Backend is an HTTP/1.1 server on 127.0.0.1 serving BackendHandler(name),
// closed when the test ends.
func Backend(t testing.TB, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(BackendHandler(name))
	t.Cleanup(s.Close)
	return s
}

// BackendHandler answers with name in the body and in header x-backend,
// and echoes the request in headers x-seen-path, x-seen-host,
// x-seen-proto, x-seen-xfp (x-forwarded-proto) and, for each request
// header x-test-*, Seen-X-Test-*.
func BackendHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-backend", name)
		w.Header().Set("x-seen-path", r.URL.RequestURI())
		w.Header().Set("x-seen-host", r.Host)
		w.Header().Set("x-seen-proto", r.Proto)
		w.Header().Set("x-seen-xfp", r.Header.Get("X-Forwarded-Proto"))
		for k, v := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-test-") {
				w.Header()["Seen-"+k] = v
			}
		}
		_, _ = io.WriteString(w, name)
	})
}

// Listeners is what Get needs of a data plane: the address its listener on
// a port is bound at (dataplane.DataPlane.Addr).
type Listeners interface {
	Addr(port uint32) net.Addr
}

// Get sends a request to the listener on port with Host host, redirects
// not followed, on a connection of its own. The response's body is read
// whole: it stays readable, and BodyOf returns it.
func Get(t testing.TB, dp Listeners, port uint32, method, host, path string, hdr http.Header) *http.Response {
	t.Helper()
	a := dp.Addr(port)
	if a == nil {
		t.Fatalf("no listener on port %d", port)
	}
	req, err := http.NewRequest(method, "http://"+a.String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header[k] = v
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	resp.Header.Set("x-test-body", string(b))
	return resp
}

// BodyOf is the body of a response Get returned.
func BodyOf(r *http.Response) string { return r.Header.Get("x-test-body") }

// EditAny unpacks a into msg, changes it with edit and packs it anew; a is
// not modified.
func EditAny[M proto.Message](t testing.TB, a *anypb.Any, msg M, edit func(M)) *anypb.Any {
	t.Helper()
	if err := a.UnmarshalTo(msg); err != nil {
		t.Fatal(err)
	}
	edit(msg)
	out, err := anypb.New(msg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
