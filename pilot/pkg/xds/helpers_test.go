// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"context"
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
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/adsclient"
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

// adsStream is what the tests use of an adsclient stream.
type adsStream[Req, Resp any] interface {
	Send(*Req) error
	Recv(time.Duration) (*Resp, error)
	Quiet(time.Duration) error
}

// client is an ADS stream of the test (s) whose helpers fail the test;
// every response recv returns is validated (checkAnys).
type client[Req, Resp any, S adsStream[Req, Resp]] struct {
	s S
	t *testing.T
}

// sotwClient and deltaClient are the two kinds.
type (
	sotwClient  = client[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse, *adsclient.SotW]
	deltaClient = client[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse, *adsclient.Delta]
)

func (e *env) sotw(n *corev3.Node) *sotwClient {
	e.t.Helper()
	return &sotwClient{s: adsclient.NewSotW(e.t, e.conn, n, adsclient.Buffer(100)), t: e.t}
}

func (e *env) delta(n *corev3.Node) *deltaClient {
	e.t.Helper()
	return &deltaClient{s: adsclient.NewDelta(e.t, e.conn, n, adsclient.Buffer(100)), t: e.t}
}

func (c *client[Req, Resp, S]) send(req *Req) {
	c.t.Helper()
	if err := c.s.Send(req); err != nil {
		c.t.Fatal(err)
	}
}

// recv waits for a response and checks every resource in it.
func (c *client[Req, Resp, S]) recv() *Resp {
	c.t.Helper()
	r, err := c.s.Recv(recvTimeout)
	if err != nil {
		c.t.Fatal(err)
	}
	switch r := any(r).(type) {
	case *discoveryv3.DiscoveryResponse:
		checkAnys(c.t, r.GetResources())
	case *discoveryv3.DeltaDiscoveryResponse:
		checkAnys(c.t, adsclient.Resources(r))
	}
	return r
}

// quiet fails if a response arrives within quietWait.
func (c *client[Req, Resp, S]) quiet(why string) {
	c.t.Helper()
	if err := c.s.Quiet(quietWait); err != nil {
		c.t.Fatalf("%s: %v", why, err)
	}
}

// checkAnys unpacks every served resource and runs adsclient.Validate on
// it (ValidateAll on it and on every Any inside it).
func checkAnys(t *testing.T, as []*anypb.Any) {
	t.Helper()
	for _, a := range as {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatalf("served resource %s: %v", a.GetTypeUrl(), err)
		}
		if err := adsclient.Validate(m); err != nil {
			t.Fatalf("served resource fails validation: %v", err)
		}
	}
}
