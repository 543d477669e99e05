// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// hungProcessor accepts each ext_proc stream, reads the request headers
// and never answers; it reports the end of each stream on ended.
type hungProcessor struct {
	extprocsvc.UnimplementedExternalProcessorServer
	ended chan struct{}
}

func (p *hungProcessor) Process(s extprocsvc.ExternalProcessor_ProcessServer) error {
	defer func() { p.ended <- struct{}{} }()
	if _, err := s.Recv(); err != nil {
		return err
	}
	<-s.Context().Done()
	return s.Context().Err()
}

// A route's max_stream_duration is counted from the stream's start by the
// connection manager (RouteAction.MaxStreamDuration in the route API
// reference; ConnectionManagerImpl::ActiveStream::onStreamMaxDurationReached
// in source/common/http/conn_manager_impl.cc): it ends a request held by a
// hung ext_proc server (which RouteAction.timeout, started by the router,
// never sees), it replaces RouteAction.timeout (FilterUtility::finalTimeout
// in source/common/router/router.cc takes no global timeout once a route
// uses max_stream_duration), it answers 504 "downstream duration timeout",
// or 408 while the request body is still arriving
// (Utility::maybeRequestTimeoutCode), to a gRPC request with grpc-status
// DEADLINE_EXCEEDED, and it resets a response already started.
func TestMaxStreamDuration(t *testing.T) {
	const limit = 150 * time.Millisecond
	dp := newTestDP(t, Options{})

	// hang reads the request body first: Go's server notices a closed
	// connection (and ends r.Context()) only once the body was read.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "first chunk")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(stall.Close)

	proc := &hungProcessor{ended: make(chan struct{}, 4)}
	gs := grpc.NewServer()
	extprocsvc.RegisterExternalProcessorServer(gs, proc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	override, err := anypb.New(&extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode: extprocv3.ProcessingMode_SEND, ResponseHeaderMode: extprocv3.ProcessingMode_SEND,
			RequestBodyMode: extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED, ResponseBodyMode: extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED,
			RequestTrailerMode: extprocv3.ProcessingMode_SEND, ResponseTrailerMode: extprocv3.ProcessingMode_SEND,
		},
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "epp"}}},
		// A hung processor is no failure: failure_mode_allow must not let
		// the request through.
		FailureModeAllow: wrapperspb.Bool(true),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	bounded := func(cluster string, routeTimeout time.Duration) *routev3.Route_Route {
		return &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier:  &routev3.RouteAction_Cluster{Cluster: cluster},
			Timeout:           durationpb.New(routeTimeout),
			MaxStreamDuration: &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(limit)},
		}}
	}
	load(t, dp,
		edsCluster(t, "hang", false), cla("hang", hang.Listener.Addr().String()),
		edsCluster(t, "stall", false), cla("stall", stall.Listener.Addr().String()),
		edsCluster(t, "epp", true), cla("epp", lis.Addr().String()),
		rc(&routev3.VirtualHost{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{
			{Match: prefix("/hung-epp"), Action: bounded("hang", 0), TypedPerFilterConfig: map[string]*anypb.Any{filterExtProc: override}},
			// RouteAction.timeout (10 ms) is ignored once max_stream_duration is set.
			{Match: prefix("/slow"), Action: bounded("hang", 10*time.Millisecond)},
			{Match: prefix("/stall"), Action: bounded("stall", 0)},
		}}), seedListener(t))

	t.Run("hung ext_proc server, GET", func(t *testing.T) {
		start := time.Now()
		resp := get(t, dp, 80, "GET", "x", "/hung-epp", nil)
		took := time.Since(start)
		if resp.StatusCode != 504 || bodyOf(resp) != bodyDurationTimeout {
			t.Fatalf("%d %q, want 504 %q", resp.StatusCode, bodyOf(resp), bodyDurationTimeout)
		}
		if took < limit {
			t.Fatalf("answered after %v, before max_stream_duration %v", took, limit)
		}
		select {
		case <-proc.ended:
		case <-time.After(10 * time.Second):
			t.Fatal("the ext_proc stream was not ended after the local reply")
		}
		if c := dp.Counters(); c.ExtProcFailuresAllowed != 0 || c.MaxDurationReached != 1 {
			t.Fatalf("counters %+v: want no failure_mode_allow continuation and one max duration", c)
		}
	})

	t.Run("RouteAction.timeout ignored", func(t *testing.T) {
		start := time.Now()
		resp := get(t, dp, 80, "GET", "x", "/slow", nil)
		if resp.StatusCode != 504 || bodyOf(resp) != bodyDurationTimeout || time.Since(start) < limit {
			t.Fatalf("%d %q after %v, want 504 %q after %v", resp.StatusCode, bodyOf(resp), time.Since(start), bodyDurationTimeout, limit)
		}
	})

	t.Run("gRPC request: DEADLINE_EXCEEDED", func(t *testing.T) {
		resp := get(t, dp, 80, "POST", "x", "/slow", http.Header{"Content-Type": {"application/grpc"}})
		if got := []string{resp.Header.Get("grpc-status"), resp.Header.Get("grpc-message")}; resp.StatusCode != 200 ||
			got[0] != "4" || got[1] != bodyDurationTimeout {
			t.Fatalf("%d grpc-status %q grpc-message %q, want 200, 4 (DEADLINE_EXCEEDED), %q", resp.StatusCode, got[0], got[1], bodyDurationTimeout)
		}
	})

	t.Run("request body still arriving: 408", func(t *testing.T) {
		pr, pw := io.Pipe()
		t.Cleanup(func() { pw.Close() })
		req, err := http.NewRequest("POST", "http://"+dp.Addr(80).String()+"/slow", pr)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = pw.Write([]byte("part of a body")) }()
		c := &http.Client{Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 408 || string(b) != bodyDurationTimeout {
			t.Fatalf("%d %q, want 408 %q", resp.StatusCode, b, bodyDurationTimeout)
		}
	})

	t.Run("response started: reset", func(t *testing.T) {
		c := &http.Client{Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		resp, err := c.Get("http://" + dp.Addr(80).String() + "/stall")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "first chunk" || err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("%d %q %v, want 200, the first chunk, then a reset stream", resp.StatusCode, b, err)
		}
	})
}
