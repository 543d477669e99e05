// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"

	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/upstreamtls"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pilot/test/seedmodel"
	kubelib "github.com/infermesh/infermesh/pkg/kube"
)

const seedEPPHost = "vllm-llama3-8b-epp.llm-namespace.svc.cluster.local"

// answeringEPP is an ext_proc server that answers every stream's request
// headers with an immediate 417, so a reply of 417 proves the EPP was
// reached; it counts the streams.
type answeringEPP struct {
	extprocsvc.UnimplementedExternalProcessorServer
	streams atomic.Int32
}

func (p *answeringEPP) Process(s extprocsvc.ExternalProcessor_ProcessServer) error {
	p.streams.Add(1)
	if _, err := s.Recv(); err != nil {
		return err
	}
	return s.Send(&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocsvc.ImmediateResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode_ExpectationFailed}},
	}})
}

// serveEPP serves an answeringEPP over TLS with cert on a loopback port.
func serveEPP(t *testing.T, cert tls.Certificate) (*answeringEPP, string) {
	t.Helper()
	epp := &answeringEPP{}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12,
	})))
	extprocsvc.RegisterExternalProcessorServer(gs, epp)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return epp, lis.Addr().String()
}

// The EPP's name is verified when a DestinationRule (SIMPLE, no
// insecureSkipVerify) verifies its certificate: against the rule's
// subjectAltNames, else the SNI sent (the rule's sni, else the EPP host).
// A certificate from the trusted CA for another name is refused: the seed
// pool (FailOpen) then falls back to a model server without the EPP. The
// rule goes through the product path: upstreamtls.ResolveRule and Resolve, then core's
// clusters, served by the data plane, whose TLS checks SANs as Envoy's
// default validator does.
func TestEPPNameVerified(t *testing.T) {
	ca := newTestCA(t)
	caFile := ca.file(t)
	simple := func(sni string, sans ...string) *kubelib.ClientTLS {
		return &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, SNI: sni, SubjectAltNames: sans}
	}
	for _, tc := range []struct {
		name     string
		tls      *kubelib.ClientTLS
		certFor  []string
		reachEPP bool
	}{
		{"no sni, no SANs: certificate for the EPP host", simple(""), []string{seedEPPHost}, true},
		{"no sni, no SANs: certificate for another name", simple(""), []string{"other.example.com"}, false},
		{"sni, no SANs: certificate for the sni", simple("epp.example.com"), []string{"epp.example.com"}, true},
		{"sni, no SANs: certificate for the EPP host only", simple("epp.example.com"), []string{seedEPPHost}, false},
		{"SANs: certificate for one of them", simple("", "a.example.com", "b.example.com"), []string{"b.example.com"}, true},
		{"SANs: certificate for the EPP host only", simple("", "a.example.com"), []string{seedEPPHost}, false},
		{"insecureSkipVerify: any certificate", &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, InsecureSkipVerify: true},
			[]string{"other.example.com"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			epp, eppAddr := serveEPP(t, ca.serverCert(t, tc.certFor...))
			rule := upstreamtls.ResolveRule(kubelib.DestinationRule{Namespace: "llm-namespace", Name: "epp", Host: "vllm-llama3-8b-epp", TLS: tc.tls}, "cluster.local")
			res := upstreamtls.Resolve(upstreamtls.Port{Service: types.NamespacedName{Namespace: "llm-namespace", Name: "vllm-llama3-8b-epp"}, Host: seedEPPHost},
				upstreamtls.Sources{Rules: []upstreamtls.Rule{rule}})
			if res.Problem != "" || res.TLS == nil {
				t.Fatalf("resolution %+v", res)
			}
			model := backend(t, "model")
			dp := newTestDP(t, Options{Dial: redirect(map[string]string{
				"10.244.0.16:9002": eppAddr, "10.244.0.13:8000": model.Listener.Addr().String(),
			})})
			gw := seedmodel.GatewayEPPTLS(*res.TLS)
			built, err := core.BuildGateway(&gw, core.Inputs{
				Endpoints: map[string][]core.Endpoint{
					seedShadowCluster: {{Address: "10.244.0.13", Port: 8000}},
					seedEPPCluster:    {{Address: "10.244.0.16", Port: 9002}},
				},
			}, core.Options{InferenceEnabled: true, SystemCAFile: caFile})
			if err != nil {
				t.Fatal(err)
			}
			load(t, dp, resourcesOf(built)...)

			resp := get(t, dp, 80, "GET", "llm.ssup2.com", "/v1/models", nil)
			if tc.reachEPP {
				if resp.StatusCode != 417 || epp.streams.Load() != 1 {
					t.Fatalf("status %d, %d EPP streams; want the EPP's 417 (failures allowed: %d)",
						resp.StatusCode, epp.streams.Load(), dp.Counters().ExtProcFailuresAllowed)
				}
				return
			}
			if resp.StatusCode != 200 || bodyOf(resp) != "model" || epp.streams.Load() != 0 || dp.Counters().ExtProcFailuresAllowed != 1 {
				t.Fatalf("status %d %q, %d EPP streams, failures allowed %d; want the EPP refused at the handshake and the FailOpen fallback",
					resp.StatusCode, bodyOf(resp), epp.streams.Load(), dp.Counters().ExtProcFailuresAllowed)
			}
		})
	}
}

// redirect dials the real address of each name in to, others as given.
func redirect(to map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := to[addr]; ok {
			addr = a
		}
		return d.DialContext(ctx, network, addr)
	}
}

// resourcesOf lists res for load, clusters and endpoints before the
// routes and listeners that use them.
func resourcesOf(res core.Resources) []proto.Message {
	var out []proto.Message
	for _, c := range res.Clusters {
		out = append(out, c)
	}
	for _, e := range res.Endpoints {
		out = append(out, e)
	}
	for _, r := range res.Routes {
		out = append(out, r)
	}
	for _, l := range res.Listeners {
		out = append(out, l)
	}
	return out
}
