// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package adsclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// ErrNoResponse is what Recv returns (wrapped) when no response came in
// time.
var ErrNoResponse = errors.New("no response")

// StreamOption configures a stream.
type StreamOption func(*streamConfig)

type streamConfig struct {
	token         string
	within        time.Duration
	waitForReady  bool
	autoACK       bool
	nodeFirstOnly bool
	buffer        int
}

// Token sends "authorization: Bearer <token>" metadata on the stream, as
// a proxy authorized by its ServiceAccount token does; "" sends none.
func Token(token string) StreamOption { return func(c *streamConfig) { c.token = token } }

// Within ends the stream after d (and at the test's end, whichever comes
// first).
func Within(d time.Duration) StreamOption { return func(c *streamConfig) { c.within = d } }

// WaitForReady opens the stream once the server is reachable rather than
// failing while it is not (a process still starting).
func WaitForReady() StreamOption { return func(c *streamConfig) { c.waitForReady = true } }

// AutoACK ACKs every response as soon as it is read, before the caller
// sees it, so that the next push is never held back by the caller.
func AutoACK() StreamOption { return func(c *streamConfig) { c.autoACK = true } }

// NodeOnFirstOnly sends the node on the first request only (Envoy's
// set_node_on_first_message_only); by default every request carries it.
func NodeOnFirstOnly() StreamOption { return func(c *streamConfig) { c.nodeFirstOnly = true } }

// Buffer is how many responses the stream holds for the caller before it
// stops reading (default 64).
func Buffer(n int) StreamOption { return func(c *streamConfig) { c.buffer = n } }

// received is a response and when it was read.
type received[Resp any] struct {
	resp *Resp
	at   time.Time
}

// reader is what SotW and Delta share: the gRPC stream, the node, the
// goroutine that reads responses into in, and the lock that orders sends.
type reader[Req, Resp any] struct {
	cfg    streamConfig
	node   *corev3.Node
	stream grpc.BidiStreamingClient[Req, Resp]
	ctx    context.Context
	cancel context.CancelFunc
	// describe says what a response is, for Quiet's error.
	describe func(*Resp) string
	// setNode puts the node on a request.
	setNode func(*Req, *corev3.Node)

	// mu orders sends (gRPC allows one sender at a time) and guards what
	// the stream kinds keep of their requests.
	mu       sync.Mutex
	nodeSent bool

	in    chan received[Resp]
	ended chan struct{} // closed once err is set
	err   error
	done  chan struct{} // closed when the reading goroutine returns
	last  atomic.Int64
}

// kind is what tells the two stream kinds apart: how to start one, put
// the node on a request, describe a response and wrap the reader.
type kind[Req, Resp, S any] struct {
	start    func(discoveryv3.AggregatedDiscoveryServiceClient, context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[Req, Resp], error)
	setNode  func(*Req, *corev3.Node)
	describe func(*Resp) string
	// wrap returns the stream around r and its ACK.
	wrap func(r *reader[Req, Resp]) (S, func(*Resp) error)
}

// open starts a stream of kind k for node on conn, on a context derived
// from ctx, and starts reading it.
func open[Req, Resp, S any](ctx context.Context, k kind[Req, Resp, S], conn *grpc.ClientConn, node *corev3.Node, opts []StreamOption) (S, error) {
	cfg := streamConfig{buffer: 64}
	for _, o := range opts {
		o(&cfg)
	}
	var cancel context.CancelFunc
	if cfg.within > 0 {
		ctx, cancel = context.WithTimeout(ctx, cfg.within)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	if cfg.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+cfg.token)
	}
	var copts []grpc.CallOption
	if cfg.waitForReady {
		copts = append(copts, grpc.WaitForReady(true))
	}
	s, err := k.start(discoveryv3.NewAggregatedDiscoveryServiceClient(conn), ctx, copts...)
	if err != nil {
		cancel()
		var none S
		return none, err
	}
	r := &reader[Req, Resp]{cfg: cfg, node: node, stream: s, ctx: ctx, cancel: cancel, setNode: k.setNode, describe: k.describe,
		in: make(chan received[Resp], cfg.buffer), ended: make(chan struct{}), done: make(chan struct{})}
	out, ack := k.wrap(r)
	r.run(ack)
	return out, nil
}

// The stream openers: Open* returns the error, New* fails the test and
// closes the stream at the test's end. A stream ends with ctx (New*: the
// test), after Within, or at Close.
var (
	// OpenSotW opens a state-of-the-world stream for node on conn.
	OpenSotW = opener(sotwKind)
	// NewSotW is OpenSotW for a test.
	NewSotW = forTest(sotwKind)
	// OpenDelta opens a delta stream for node on conn.
	OpenDelta = opener(deltaKind)
	// NewDelta is OpenDelta for a test.
	NewDelta = forTest(deltaKind)
)

// opener is open of kind k.
func opener[Req, Resp, S any](k kind[Req, Resp, S]) func(context.Context, *grpc.ClientConn, *corev3.Node, ...StreamOption) (S, error) {
	return func(ctx context.Context, conn *grpc.ClientConn, node *corev3.Node, opts ...StreamOption) (S, error) {
		return open(ctx, k, conn, node, opts)
	}
}

// forTest is open of kind k for a test: it fails the test when the stream
// cannot be opened and closes the stream at the test's end.
func forTest[Req, Resp any, S interface{ Close() }](k kind[Req, Resp, S]) func(testing.TB, *grpc.ClientConn, *corev3.Node, ...StreamOption) S {
	return func(t testing.TB, conn *grpc.ClientConn, node *corev3.Node, opts ...StreamOption) S {
		t.Helper()
		s, err := open(context.Background(), k, conn, node, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
}

// run reads until the stream ends, ACKing each response first with ack
// when AutoACK is set. A failed ACK is not the stream's error: the
// receive that follows returns the stream's status.
func (r *reader[Req, Resp]) run(ack func(*Resp) error) {
	go func() {
		defer close(r.done)
		for {
			m, err := r.stream.Recv()
			if err != nil {
				r.err = err
				close(r.ended)
				return
			}
			at := time.Now()
			r.last.Store(at.UnixNano())
			if r.cfg.autoACK {
				_ = ack(m)
			}
			select {
			case r.in <- received[Resp]{resp: m, at: at}:
			case <-r.ctx.Done():
				r.err = r.ctx.Err()
				close(r.ended)
				return
			}
		}
	}()
}

// sendLocked sends req with r.mu held, putting the node on it unless it
// names one or NodeOnFirstOnly says it was sent already.
func (r *reader[Req, Resp]) sendLocked(req *Req) error {
	if any(req).(interface{ GetNode() *corev3.Node }).GetNode() == nil && (!r.cfg.nodeFirstOnly || !r.nodeSent) {
		r.setNode(req, r.node)
	}
	r.nodeSent = true
	return r.stream.Send(req)
}

// Send sends req as it is, with the node put on it as the stream's other
// requests have it (when req names no node).
func (r *reader[Req, Resp]) Send(req *Req) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sendLocked(req)
}

// Recv returns the next response, waiting at most d. It returns an error
// wrapping ErrNoResponse when none came, and the stream's error (a gRPC
// status: check it with status.Code) once the stream has ended and every
// response read before its end has been returned.
func (r *reader[Req, Resp]) Recv(d time.Duration) (*Resp, error) {
	m, _, err := r.RecvAt(d)
	return m, err
}

// RecvAt is Recv that also returns when the response was read off the
// stream.
func (r *reader[Req, Resp]) RecvAt(d time.Duration) (*Resp, time.Time, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case m := <-r.in:
		return m.resp, m.at, nil
	case <-r.ended:
		select {
		case m := <-r.in:
			return m.resp, m.at, nil
		default:
			return nil, time.Time{}, r.err
		}
	case <-t.C:
		return nil, time.Time{}, fmt.Errorf("node %s: %w within %v", r.node.GetId(), ErrNoResponse, d)
	}
}

// Quiet waits d and returns an error describing the first response that
// arrives in that time; nil when none does (the stream ending is not a
// response).
func (r *reader[Req, Resp]) Quiet(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case m := <-r.in:
		return fmt.Errorf("node %s: got %s", r.node.GetId(), r.describe(m.resp))
	case <-t.C:
		return nil
	}
}

// Node is the stream's node.
func (r *reader[Req, Resp]) Node() *corev3.Node { return r.node }

// Drain discards the responses read so far and returns how many there
// were.
func (r *reader[Req, Resp]) Drain() int {
	for n := 0; ; n++ {
		select {
		case <-r.in:
		default:
			return n
		}
	}
}

// Last is when the last response was read off the stream (zero before
// the first).
func (r *reader[Req, Resp]) Last() time.Time {
	if ns := r.last.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// CloseSend half-closes the stream: the proxy sends no more requests
// (the server ends the stream in turn).
func (r *reader[Req, Resp]) CloseSend() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stream.CloseSend()
}

// Close ends the stream and waits for its reading goroutine.
func (r *reader[Req, Resp]) Close() {
	r.cancel()
	<-r.done
}
