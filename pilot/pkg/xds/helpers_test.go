// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Seed names, written out.
const (
	seedGatewayKey    = "gateway-namespace/gateway"
	seedShadowHost    = "vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local"
	seedEPPHost       = "vllm-llama3-8b-epp.llm-namespace.svc.cluster.local"
	seedShadowCluster = "outbound|54321||vllm-llama3-8b-ip-22dc7de1.llm-namespace.svc.cluster.local"
	seedEPPCluster    = "outbound|9002||vllm-llama3-8b-epp.llm-namespace.svc.cluster.local"
)

// seedGateway is the seed scenario (seedmodel.Gateway).
func seedGateway() model.Gateway { return seedmodel.Gateway() }

// otherGateway is a second Gateway with its own pool "other-pool".
func otherGateway() model.Gateway {
	return seedmodel.GatewayWith("other-ns", "other-gw", "other-ns", "other-route", "other.example.com",
		seedmodel.PoolBackend("other-ns", "other-pool", "other-pool-ip-00000000", inferencev1.EndpointPickerFailClose))
}

const (
	otherShadowCluster = "outbound|54321||other-pool-ip-00000000.other-ns.svc.cluster.local"
	otherEPPCluster    = "outbound|9002||other-pool-epp.other-ns.svc.cluster.local"
)

// seedEndpoints are the model servers 10.244.0.13-(12+n):8000.
func seedEndpoints(n int) model.ClusterEndpoints {
	ce := model.ClusterEndpoints{Cluster: seedShadowCluster}
	for i := range n {
		ce.Endpoints = append(ce.Endpoints, model.Endpoint{Address: "10.244.0." + itoa(13+i), Port: 8000})
	}
	return ce
}

func itoa(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

func baseEndpoints() []model.ClusterEndpoints {
	return []model.ClusterEndpoints{
		seedEndpoints(3),
		{Cluster: seedEPPCluster, Endpoints: []model.Endpoint{{Address: "10.244.0.16", Port: 9002}}},
		{Cluster: otherShadowCluster, Endpoints: []model.Endpoint{{Address: "10.245.0.1", Port: 8000}}},
		{Cluster: otherEPPCluster, Endpoints: []model.Endpoint{{Address: "10.245.0.2", Port: 9002}}},
	}
}

// env is a running Server on loopback with static input collections.
type env struct {
	t         *testing.T
	srv       *Server
	gateways  krt.StaticCollection[model.Gateway]
	endpoints krt.StaticCollection[model.ClusterEndpoints]
	secrets   krt.StaticCollection[*corev1.Secret]
	registry  *prometheus.Registry
	conn      *grpc.ClientConn
	http      *httptest.Server
}

type envOptions struct {
	gateways  []model.Gateway
	endpoints []model.ClusterEndpoints
	// endpointsSynced gates the Endpoints collection's sync (nil: synced).
	endpointsSynced krt.Syncer
	mutate          func(gateway string, res *core.Resources)
	// serving is Config.Serving (nil: none).
	serving ServingSink
	// logger defaults to one that discards.
	logger *slog.Logger
	// secrets are Config.Secrets.
	secrets []*corev1.Secret
}

// newEnv starts a Server; everything stops at test cleanup.
func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	stop := make(chan struct{})
	e := &env{t: t, registry: prometheus.NewRegistry()}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e.gateways = krt.NewStaticCollection(nil, o.gateways, krt.WithStop(stop))
	e.endpoints = krt.NewStaticCollection(o.endpointsSynced, o.endpoints, krt.WithStop(stop))
	e.secrets = krt.NewStaticCollection(nil, o.secrets, krt.WithStop(stop))
	srv, err := NewServer(Config{
		Gateways: e.gateways, Endpoints: e.endpoints, Secrets: e.secrets,
		Translate: core.Options{InferenceEnabled: true},
		Debounce:  20 * time.Millisecond, MaxDelay: 100 * time.Millisecond,
		Registry: e.registry, KrtDebug: krt.NewDebugHandler(),
		Logger: o.logger, Serving: o.serving,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.mutate = o.mutate
	e.srv = srv
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	e.conn = conn
	e.http = httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		e.http.Close()
		_ = conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		close(stop)
	})
	return e
}

// node is a proxy of Gateway ns/name.
func node(id, ns, name string) *corev3.Node {
	md, _ := structpb.NewStruct(map[string]any{MetadataGatewayNamespace: ns, MetadataGatewayName: name})
	return &corev3.Node{Id: id, Metadata: md}
}

// recvTimeout is how long tests wait for a response that must arrive, and
// quietWait how long they watch for one that must not.
const (
	recvTimeout = 10 * time.Second
	quietWait   = 400 * time.Millisecond
)

// sotwClient is a raw state-of-the-world ADS stream.
type sotwClient struct {
	t      *testing.T
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node   *corev3.Node
	in     chan *discoveryv3.DiscoveryResponse
	errs   chan error
}

func (e *env) sotw(n *corev3.Node) *sotwClient {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(e.conn).StreamAggregatedResources(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	c := &sotwClient{t: e.t, stream: s, node: n, in: make(chan *discoveryv3.DiscoveryResponse, 100), errs: make(chan error, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			r, err := s.Recv()
			if err != nil {
				c.errs <- err
				return
			}
			c.in <- r
		}
	}()
	e.t.Cleanup(func() { cancel(); <-done })
	return c
}

func (c *sotwClient) send(req *discoveryv3.DiscoveryRequest) {
	c.t.Helper()
	req.Node = c.node
	if err := c.stream.Send(req); err != nil {
		c.t.Fatal(err)
	}
}

// recv waits for a response and checks every resource in it.
func (c *sotwClient) recv() *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	select {
	case r := <-c.in:
		checkAnys(c.t, r.GetResources())
		return r
	case err := <-c.errs:
		c.t.Fatalf("stream ended: %v", err)
	case <-time.After(recvTimeout):
		c.t.Fatal("no response")
	}
	return nil
}

// quiet fails if a response arrives within quietWait.
func (c *sotwClient) quiet(why string) {
	c.t.Helper()
	select {
	case r := <-c.in:
		c.t.Fatalf("%s: got a %s response version %s with %d resources", why, r.GetTypeUrl(), r.GetVersionInfo(), len(r.GetResources()))
	case <-time.After(quietWait):
	}
}

// deltaClient is a raw DeltaAggregatedResources stream.
type deltaClient struct {
	t      *testing.T
	stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node   *corev3.Node
	in     chan *discoveryv3.DeltaDiscoveryResponse
	errs   chan error
}

func (e *env) delta(n *corev3.Node) *deltaClient {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(e.conn).DeltaAggregatedResources(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	c := &deltaClient{t: e.t, stream: s, node: n, in: make(chan *discoveryv3.DeltaDiscoveryResponse, 100), errs: make(chan error, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			r, err := s.Recv()
			if err != nil {
				c.errs <- err
				return
			}
			c.in <- r
		}
	}()
	e.t.Cleanup(func() { cancel(); <-done })
	return c
}

func (c *deltaClient) send(req *discoveryv3.DeltaDiscoveryRequest) {
	c.t.Helper()
	req.Node = c.node
	if err := c.stream.Send(req); err != nil {
		c.t.Fatal(err)
	}
}

func (c *deltaClient) recv() *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	select {
	case r := <-c.in:
		for _, res := range r.GetResources() {
			checkAnys(c.t, []*anypb.Any{res.GetResource()})
		}
		return r
	case err := <-c.errs:
		c.t.Fatalf("stream ended: %v", err)
	case <-time.After(recvTimeout):
		c.t.Fatal("no delta response")
	}
	return nil
}

func (c *deltaClient) quiet(why string) {
	c.t.Helper()
	select {
	case r := <-c.in:
		c.t.Fatalf("%s: got a %s delta response with %d resources, removed %v", why, r.GetTypeUrl(), len(r.GetResources()), r.GetRemovedResources())
	case <-time.After(quietWait):
	}
}

// checkAnys unpacks every served resource and runs ValidateAll on it and on
// every Any inside it (core.Validate on a one-resource set).
func checkAnys(t *testing.T, as []*anypb.Any) {
	t.Helper()
	for _, a := range as {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatalf("served resource %s: %v", a.GetTypeUrl(), err)
		}
		if err := validateOne(m); err != nil {
			t.Fatalf("served resource fails validation: %v", err)
		}
	}
}

// validateOne runs ValidateAll on m and, recursively, on every message
// packed in an Any inside it.
func validateOne(m proto.Message) error {
	var errs []error
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, err)
		}
	}
	var walk func(protoreflect.Message)
	walk = func(r protoreflect.Message) {
		if a, ok := r.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if err := validateOne(inner); err != nil {
				errs = append(errs, err)
			}
			return
		}
		r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message())
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(v.Message())
			}
			return true
		})
	}
	walk(m.ProtoReflect())
	return errors.Join(errs...)
}
