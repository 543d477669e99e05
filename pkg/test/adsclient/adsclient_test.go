// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package adsclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/infermesh/infermesh/pkg/test/certs"
)

func names(t *testing.T, as []*anypb.Any) []string {
	t.Helper()
	cs, err := Clusters(as)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, c.GetName())
	}
	slices.Sort(out)
	return out
}

// TestSotWRequestACKNACK: a request, its response, the ACK (version and
// nonce, the requested names again), a push, and its NACK carrying the
// error detail, the nonce and the version last ACKed, as the server reads
// them.
func TestSotWRequestACKNACK(t *testing.T) {
	cp := startControlPlane(t)
	cp.set(t, "p1", "v1", "a", "b")
	s := NewSotW(t, Dial(t, cp.addr), &corev3.Node{Id: "p1"})
	if err := s.Request(resourcev3.ClusterType, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if req := next(t, cp.sotw); req.GetNode().GetId() != "p1" || !slices.Equal(req.GetResourceNames(), []string{"a", "b"}) {
		t.Fatalf("request: node %q names %v", req.GetNode().GetId(), req.GetResourceNames())
	}
	r, err := s.Recv(wait)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, r.GetResources()); r.GetVersionInfo() != "v1" || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("response version %s clusters %v", r.GetVersionInfo(), got)
	}
	if err := s.ACK(r); err != nil {
		t.Fatal(err)
	}
	ack := next(t, cp.sotw)
	if ack.GetVersionInfo() != "v1" || ack.GetResponseNonce() != r.GetNonce() || ack.GetErrorDetail() != nil ||
		!slices.Equal(ack.GetResourceNames(), []string{"a", "b"}) || ack.GetNode().GetId() != "p1" {
		t.Fatalf("ACK as read: %v", ack)
	}
	if err := s.Quiet(200 * time.Millisecond); err != nil {
		t.Fatalf("after the ACK: %v", err)
	}

	cp.set(t, "p1", "v2", "a")
	r2, err := s.Recv(wait)
	if err != nil {
		t.Fatal(err)
	}
	if r2.GetVersionInfo() != "v2" {
		t.Fatalf("push version %s, want v2", r2.GetVersionInfo())
	}
	if err := s.NACK(r2, "rejected by the test"); err != nil {
		t.Fatal(err)
	}
	nack := next(t, cp.sotw)
	if nack.GetErrorDetail().GetMessage() != "rejected by the test" || nack.GetErrorDetail().GetCode() != int32(codes.InvalidArgument) ||
		nack.GetResponseNonce() != r2.GetNonce() || nack.GetVersionInfo() != "v1" || !slices.Equal(nack.GetResourceNames(), []string{"a", "b"}) {
		t.Fatalf("NACK as read: %v", nack)
	}
}

// TestDeltaSubscribeACKNACK: a subscription, its response decoded, the
// NACK with its error detail and nonce, then the ACK of the next push.
func TestDeltaSubscribeACKNACK(t *testing.T) {
	cp := startControlPlane(t)
	cp.set(t, "p1", "v1", "a", "b")
	d := NewDelta(t, Dial(t, cp.addr), &corev3.Node{Id: "p1"})
	if err := d.Subscribe(resourcev3.EndpointType, "b"); err != nil {
		t.Fatal(err)
	}
	if req := next(t, cp.delta); req.GetNode().GetId() != "p1" || !slices.Equal(req.GetResourceNamesSubscribe(), []string{"b"}) {
		t.Fatalf("subscription as read: %v", req)
	}
	r, err := d.Recv(wait)
	if err != nil {
		t.Fatal(err)
	}
	clas, err := Assignments(Resources(r))
	if err != nil {
		t.Fatal(err)
	}
	if len(clas) != 1 || clas[0].GetClusterName() != "b" || !slices.Equal(Addresses(clas[0]), []string{"10.0.0.1:8001"}) {
		t.Fatalf("assignments %v", clas)
	}
	if err := d.NACK(r, "bad endpoint"); err != nil {
		t.Fatal(err)
	}
	nack := next(t, cp.delta)
	if nack.GetErrorDetail().GetMessage() != "bad endpoint" || nack.GetResponseNonce() != r.GetNonce() || nack.GetTypeUrl() != resourcev3.EndpointType {
		t.Fatalf("NACK as read: %v", nack)
	}
	cp.set(t, "p1", "v2", "b", "a") // b now at port 8000
	r, err = d.Recv(wait)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.ACK(r); err != nil {
		t.Fatal(err)
	}
	if ack := next(t, cp.delta); ack.GetErrorDetail() != nil || ack.GetResponseNonce() != r.GetNonce() {
		t.Fatalf("ACK as read: %v", ack)
	}
}

// TestRecvIsBounded: a receive with nothing to come returns ErrNoResponse
// after its wait; a stream that ended returns its status, after the
// responses read before its end.
func TestRecvIsBounded(t *testing.T) {
	cp := startControlPlane(t)
	s := NewSotW(t, Dial(t, cp.addr), &corev3.Node{Id: "nobody"}, Within(time.Second))
	if err := s.Request(resourcev3.ClusterType); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(50 * time.Millisecond); !errors.Is(err, ErrNoResponse) || !strings.Contains(err.Error(), "node nobody") {
		t.Fatalf("Recv = %v, want ErrNoResponse naming the node", err)
	}
	cp.set(t, "nobody", "v1", "a")
	_, err := s.Recv(wait)
	if err != nil {
		t.Fatal(err)
	}
	// Within ends the stream: the next receive says so, not a timeout.
	if _, err := s.Recv(wait); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("after Within: %v, want DeadlineExceeded", err)
	}
	if _, err := s.Recv(time.Millisecond); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("again: %v, want the same status", err)
	}
}

// TestQuietSeesAResponse: Quiet fails with the response that arrives.
func TestQuietSeesAResponse(t *testing.T) {
	cp := startControlPlane(t)
	d := NewDelta(t, Dial(t, cp.addr), &corev3.Node{Id: "p1"})
	if err := d.Subscribe(resourcev3.ClusterType); err != nil {
		t.Fatal(err)
	}
	if err := d.Quiet(100 * time.Millisecond); err != nil {
		t.Fatalf("nothing published: %v", err)
	}
	if !d.Last().IsZero() {
		t.Fatalf("Last = %v before any response", d.Last())
	}
	cp.set(t, "p1", "v1", "a")
	err := d.Quiet(wait)
	if err == nil || !strings.Contains(err.Error(), resourcev3.ClusterType+" delta response with 1 resources") {
		t.Fatalf("Quiet = %v, want the CDS response", err)
	}
	if d.Last().IsZero() {
		t.Fatal("Last is zero after a response")
	}
}

// TestAutoACK: every response is ACKed by the client itself, and the node
// goes on the first request only with NodeOnFirstOnly.
func TestAutoACK(t *testing.T) {
	cp := startControlPlane(t)
	cp.set(t, "p1", "v1", "a")
	d := NewDelta(t, Dial(t, cp.addr), &corev3.Node{Id: "p1"}, AutoACK(), NodeOnFirstOnly())
	if err := d.Subscribe(resourcev3.ClusterType); err != nil {
		t.Fatal(err)
	}
	next(t, cp.delta)
	r, at, err := d.RecvAt(wait)
	if err != nil {
		t.Fatal(err)
	}
	if at.IsZero() || at.After(time.Now()) {
		t.Errorf("read at %v", at)
	}
	ack := next(t, cp.delta)
	if ack.GetResponseNonce() != r.GetNonce() || ack.GetNode() != nil {
		t.Fatalf("the automatic ACK as read: %v (want nonce %s and no node)", ack, r.GetNonce())
	}
	cp.set(t, "p1", "v2", "a", "b")
	poll := time.Now().Add(wait)
	for d.Drain() == 0 {
		if time.Now().After(poll) {
			t.Fatal("no second response to drain")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ack := next(t, cp.delta); ack.GetResponseNonce() == "" || ack.GetErrorDetail() != nil {
		t.Fatalf("second ACK: %v", ack)
	}
}

// TestTLSAndToken: the stream goes over TLS trusting the given CA and
// carries "authorization: Bearer <token>"; a server that checks the token
// refuses a stream without it, and a client that does not trust the
// server's certificate gets no stream.
func TestTLSAndToken(t *testing.T) {
	crt, key, err := certs.SelfSignedFor("ads.test", []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"ads.test"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(crt)
	checkToken := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer good" {
			return status.Errorf(codes.Unauthenticated, "authorization %q", v)
		}
		return h(srv, ss)
	}
	cp := startControlPlane(t, grpc.Creds(credentials.NewServerTLSFromCert(&pair)), grpc.ChainStreamInterceptor(checkToken))
	cp.set(t, "p1", "v1", "a")
	conn := Dial(t, cp.addr, TLS(pool, "ads.test"))

	s := NewSotW(t, conn, &corev3.Node{Id: "p1"}, Token("good"))
	_ = s.Request(resourcev3.ClusterType)
	if r, err := s.Recv(wait); err != nil || len(r.GetResources()) != 1 {
		t.Fatalf("with the token: %v, %v", r, err)
	}
	d := NewDelta(t, conn, &corev3.Node{Id: "p1"})
	_ = d.Subscribe(resourcev3.ClusterType)
	if _, err := d.Recv(wait); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), `authorization []`) {
		t.Fatalf("without a token: %v, want Unauthenticated", err)
	}
	untrusted := Dial(t, cp.addr, TLS(x509.NewCertPool(), "ads.test"))
	// The handshake fails when the stream opens (or, had the connection
	// been made already, at the first receive).
	u, err := OpenSotW(context.Background(), untrusted, &corev3.Node{Id: "p1"}, Token("good"))
	if err == nil {
		defer u.Close()
		_ = u.Request(resourcev3.ClusterType)
		_, err = u.Recv(wait)
	}
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("untrusted certificate: %v, want Unavailable", err)
	}
}
