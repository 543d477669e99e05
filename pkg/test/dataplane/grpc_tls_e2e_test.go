// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// TestEndToEndGRPCRouteToNegotiatingTLSPort drives the controller, the ADS
// server and the data plane with three GRPCRoutes on the seed Gateway, each
// to a Service whose port declares no protocol (name "btls", no
// appProtocol), as the Gateway API suite's BackendTLSPolicyGRPCRoute has
// them, each served by a real gRPC server on loopback:
//
//   - btls.example.com: a BackendTLSPolicy (valid CA, hostname
//     abc.example.com) gives the port TLS, so the HTTP version is
//     negotiated by ALPN: the route is ResolvedRefs=True, the policy
//     Accepted with the Gateway as ancestor, and a gRPC call reaches the
//     TLS gRPC server, which picks h2;
//   - plain.example.com: no policy, plaintext: nothing to negotiate with, so
//     the route is ResolvedRefs=False/UnsupportedProtocol with a message
//     naming both ways out, the call fails and the (h2c-capable) gRPC
//     server gets no connection;
//   - noca.example.com: a BackendTLSPolicy whose CA ConfigMap is missing:
//     fails closed, ResolvedRefs=False/InvalidBackendTLS, the call fails
//     and the server gets no connection (never plaintext, never HTTP/1.1).
func TestEndToEndGRPCRouteToNegotiatingTLSPort(t *testing.T) {
	ca := newTestCA(t)
	cert := ca.serverCert(t, "abc.example.com")
	tlsSrv := grpcServerOn(t, countingLoopback(t), &cert)
	plainSrv := grpcServerOn(t, countingLoopback(t), nil)
	nocaSrv := grpcServerOn(t, countingLoopback(t), &cert)

	ns := seed.Namespace
	service := func(name string, port int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "btls", Port: port}}}}
	}
	route := func(name, host, svc string, port int32) *gwv1.GRPCRoute {
		return &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwv1.GRPCRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: ptr.To(gwv1.Namespace(seed.GatewayNamespace)), Name: seed.GatewayName}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)},
			Rules: []gwv1.GRPCRouteRule{{
				Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{Service: ptr.To("grpc.health.v1.Health"), Method: ptr.To("Check")}}},
				BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Name: gwv1.ObjectName(svc), Port: ptr.To(gwv1.PortNumber(port))}}}},
			}},
		}}
	}
	policy := func(name, svc, caName string) *gwv1.BackendTLSPolicy {
		return &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwv1.BackendTLSPolicySpec{
			TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{{
				LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: gwv1.ObjectName(svc)},
				SectionName:                ptr.To(gwv1.SectionName("btls")),
			}},
			Validation: gwv1.BackendTLSPolicyValidation{Hostname: "abc.example.com",
				CACertificateRefs: []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: gwv1.ObjectName(caName)}}},
		}}
	}
	stop := krt.WithStop(t.Context().Done())
	out := gateway.Build(gateway.Inputs{
		GatewayClasses: krt.NewStaticCollection(nil, []*gwv1.GatewayClass{seed.GatewayClassObject()}, stop),
		Gateways:       krt.NewStaticCollection(nil, []*gwv1.Gateway{seed.Gateway()}, stop),
		HTTPRoutes:     krt.NewStaticCollection[*gwv1.HTTPRoute](nil, nil, stop),
		GRPCRoutes: krt.NewStaticCollection(nil, []*gwv1.GRPCRoute{route("btls", "btls.example.com", "grpc-btls", 443),
			route("plain", "plain.example.com", "grpc-plain", 8080), route("noca", "noca.example.com", "grpc-noca", 443)}, stop),
		ReferenceGrants: krt.NewStaticCollection[*gwv1.ReferenceGrant](nil, nil, stop),
		Namespaces:      krt.NewStaticCollection[*corev1.Namespace](nil, nil, stop),
		Services: krt.NewStaticCollection(nil, []*corev1.Service{service("grpc-btls", 443), service("grpc-plain", 8080),
			service("grpc-noca", 443)}, stop),
		InferencePools: krt.NewStaticCollection[*inferencev1.InferencePool](nil, nil, stop),
		ConfigMaps: krt.NewStaticCollection(nil, []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"},
			Data: map[string]string{"ca.crt": string(ca.pem)}}}, stop),
		Secrets:            krt.NewStaticCollection[*corev1.Secret](nil, nil, stop),
		BackendTLSPolicies: krt.NewStaticCollection(nil, []*gwv1.BackendTLSPolicy{policy("btls", "grpc-btls", "ca"), policy("noca", "grpc-noca", "missing")}, stop),
	}, gateway.Options{ControllerName: string(seed.GatewayClassObject().Spec.ControllerName), ClusterDomain: "cluster.local",
		InferenceEnabled: true, Krt: []krt.CollectionOption{stop}})

	host := func(svc string) string { return svc + "." + ns + ".svc.cluster.local" }
	eps := krt.NewStaticCollection(nil, []model.ClusterEndpoints{
		{Cluster: core.ClusterName(443, host("grpc-btls")), Endpoints: []model.Endpoint{{Address: "10.244.0.30", Port: 8443}}},
		{Cluster: core.ClusterName(8080, host("grpc-plain")), Endpoints: []model.Endpoint{{Address: "10.244.0.31", Port: 8080}}},
		{Cluster: core.ClusterName(443, host("grpc-noca")), Endpoints: []model.Endpoint{{Address: "10.244.0.32", Port: 8443}}},
	}, stop)
	srv, err := xds.NewServer(xds.Config{
		Gateways: out.Translator, Endpoints: eps, Secrets: krt.NewStaticCollection[*corev1.Secret](nil, nil, stop),
		Translate: core.Options{InferenceEnabled: true},
		Debounce:  10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(runCtx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("xds Run: %v", err)
		}
	})
	dp := runDP(t, testBootstrap(t, lis.Addr().String(), false), map[string]string{
		"10.244.0.30:8443": tlsSrv.Addr().String(),
		"10.244.0.31:8080": plainSrv.Addr().String(),
		"10.244.0.32:8443": nocaSrv.Addr().String(),
	}, Options{})
	if err := dp.WaitFor(testCtx(t), func(s Snapshot) bool { return s.Listeners[core.ListenerName(80)] != nil }); err != nil {
		t.Fatalf("listener never served: %v (last NACK %+v)", err, dp.Snapshot().LastNACK)
	}

	routeRefs := func(name string) (string, string) {
		st := out.GRPCRouteStatuses.GetKey(ns + "/" + name)
		if st == nil || len(st.Parents) != 1 {
			return "no status", ""
		}
		c := meta.FindStatusCondition(st.Parents[0].Conditions, "ResolvedRefs")
		if c == nil {
			return "missing", ""
		}
		return string(c.Status) + "/" + c.Reason, c.Message
	}
	eventually(t, "GRPCRoute btls ResolvedRefs", func() string { s, _ := routeRefs("btls"); return s }, "True/ResolvedRefs")
	eventually(t, "GRPCRoute plain ResolvedRefs", func() string { s, _ := routeRefs("plain"); return s }, "False/UnsupportedProtocol")
	eventually(t, "GRPCRoute noca ResolvedRefs", func() string { s, _ := routeRefs("noca"); return s }, "False/InvalidBackendTLS")
	if _, msg := routeRefs("plain"); !strings.Contains(msg, "kubernetes.io/h2c") || !strings.Contains(msg, "BackendTLSPolicy") {
		t.Errorf("GRPCRoute plain: message %q, want it to name appProtocol kubernetes.io/h2c and a BackendTLSPolicy", msg)
	}
	eventually(t, "BackendTLSPolicy btls", func() string {
		st := out.BackendTLSPolicyStatuses.GetKey(ns + "/btls")
		if st == nil || len(st.Parents) != 1 || st.Parents[0].AncestorRef.Name != seed.GatewayName {
			return "no Gateway ancestor"
		}
		c := meta.FindStatusCondition(st.Parents[0].Conditions, "Accepted")
		if c == nil {
			return "no Accepted"
		}
		return string(c.Status) + "/" + c.Reason
	}, "True/Accepted")

	call := func(authority string) (*healthpb.HealthCheckResponse, error) {
		conn, err := grpc.NewClient(dp.Addr(80).String(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(authority))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
		defer cancel()
		return healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := call("btls.example.com")
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gRPC to btls.example.com: %v %v, want SERVING from the TLS gRPC server; last NACK %+v", resp, err, dp.Snapshot().LastNACK)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tlsSrv.n.Load() == 0 {
		t.Fatal("the TLS gRPC server got no connection")
	}
	for _, authority := range []string{"plain.example.com", "noca.example.com"} {
		if resp, err := call(authority); err == nil {
			t.Errorf("gRPC to %s: %v, want a failure", authority, resp)
		}
	}
	if n, m := plainSrv.n.Load(), nocaSrv.n.Load(); n != 0 || m != 0 {
		t.Errorf("connections to refused backends: plaintext %d, CA missing %d; want none", n, m)
	}
	if s := dp.Snapshot(); s.Counters.NACKs != 0 {
		t.Fatalf("the data plane NACKed: %+v", s.LastNACK)
	}
}

// grpcServerOn serves gRPC health on ln, over TLS with cert when given
// (grpc-go's TLS offers and requires ALPN h2), else plaintext (h2c).
func grpcServerOn(t *testing.T, ln *countingListener, cert *tls.Certificate) *countingListener {
	t.Helper()
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})))
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln
}

// eventually polls got until it returns want, failing after 20 s.
func eventually(t *testing.T, what string, got func() string, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for got() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s, want %s", what, got(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
