// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
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
	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// countingListener counts the TCP connections it accepts: any connection
// to an upstream whose TLS setting cannot be honoured is a failure, in
// plaintext or not.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func countingLoopback(t *testing.T) *countingListener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &countingListener{Listener: lis}
}

// upstreamServer serves, on a counting loopback listener, the seed's EPP
// (an ext_proc server answering 417, so a 417 proves it was reached) or a
// Service backend (HTTP 200 "web"), in plaintext (h2c for the EPP) or over
// TLS with cert.
func upstreamServer(t *testing.T, epp bool, cert *tls.Certificate) *countingListener {
	t.Helper()
	lis := countingLoopback(t)
	if epp {
		creds := insecure.NewCredentials()
		if cert != nil {
			creds = credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
		}
		gs := grpc.NewServer(grpc.Creds(creds))
		extprocsvc.RegisterExternalProcessorServer(gs, &answeringEPP{})
		go func() { _ = gs.Serve(lis) }()
		t.Cleanup(gs.Stop)
		return lis
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "web") }),
		ReadHeaderTimeout: 10 * time.Second}
	var serve net.Listener = lis
	if cert != nil {
		serve = tls.NewListener(lis, &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})
	}
	go func() { _ = srv.Serve(serve) }()
	t.Cleanup(func() { _ = srv.Close() })
	return lis
}

// TestEndToEndUpstreamTLSFailsClosed drives every TLS failure through the
// whole product path, on an Endpoint Picker (the seed's pool, FailOpen)
// and on a Service backend alike: the objects go through the controller
// (gateway.Build: the one upstream TLS resolution, statuses), the
// translator and the ADS server, to the test data plane, which sends a
// request. For each failure (a missing CA ConfigMap, a CA of another kind,
// a CERTIFICATE block with garbage inside, a DestinationRule credentialName
// Secret missing from the Gateway's namespace or holding no CA):
//
//   - the request is answered 500 and the upstream never gets a
//     connection: no plaintext, and no TLS verified against the system
//     trust store, which here holds the very CA that signed the upstream's
//     certificate, so a fallback to it would reach the upstream;
//   - no cluster towards the upstream lacks its transport socket, and the
//     data plane NACKs nothing (a garbage CA inlined as trusted_ca used to
//     make it refuse the Gateway's whole CDS update);
//   - the route says ResolvedRefs=False/InvalidBackendTLS, the pool
//     ResolvedRefs=False/InvalidExtensionRef, and a BackendTLSPolicy its
//     reasons (NoValidCACertificate with InvalidCACertificateRef or
//     InvalidKind).
//
// Controls (a valid CA ConfigMap, the credentialName Secret in the
// Gateway's namespace) reach the upstream over TLS. On the code before
// the resolution was shared, the EPP cases reached the EPP (in plaintext,
// or over TLS trusting the system store), the garbage CA was NACKed, and
// the Service credentialName cases were sent without TLS.
func TestEndToEndUpstreamTLSFailsClosed(t *testing.T) {
	ca := newTestCA(t)
	systemCA := ca.file(t) // the "system trust store" trusts the upstream's CA
	garbage := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not a certificate")}))
	const (
		eppSNI = "epp.example.com"
		webSNI = "web.example.com"
	)
	type target struct {
		name, service, sni string
		epp                bool
	}
	targets := []target{
		{name: "EPP", service: seed.EPPName, sni: eppSNI, epp: true},
		{name: "Service", service: "web", sni: webSNI},
	}
	policy := func(tg target, caKind, caName string) *gwv1.BackendTLSPolicy {
		return &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "upstream-tls"},
			Spec: gwv1.BackendTLSPolicySpec{
				TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{
					Kind: "Service", Name: gwv1.ObjectName(tg.service)}}},
				Validation: gwv1.BackendTLSPolicyValidation{Hostname: gwv1.PreciseHostname(tg.sni),
					CACertificateRefs: []gwv1.LocalObjectReference{{Kind: gwv1.Kind(caKind), Name: gwv1.ObjectName(caName)}}},
			}}
	}
	configMap := func(data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "upstream-ca"}, Data: map[string]string{"ca.crt": data}}
	}
	rule := func(tg target) kubelib.DestinationRule {
		return kubelib.DestinationRule{Namespace: seed.Namespace, Name: "upstream-tls", Host: tg.service,
			TLS: &kubelib.ClientTLS{Mode: kubelib.TLSModeSimple, SNI: tg.sni, CredentialName: "upstream-ca"}}
	}
	secret := func(ns, key string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upstream-ca"}, Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{key: ca.pem}}
	}
	for _, tg := range targets {
		for _, tc := range []struct {
			name string
			objs func(target) []any
			// tlsServer: the upstream serves TLS (else plaintext, which the
			// old code reached without TLS).
			tlsServer bool
			// reached: a control; else a failure, with the policy's
			// ResolvedRefs reason ("" when the setting is a
			// DestinationRule).
			reached    bool
			policyRefs string
		}{
			{name: "missing CA ConfigMap", objs: func(tg target) []any { return []any{policy(tg, "ConfigMap", "upstream-ca")} },
				policyRefs: "InvalidCACertificateRef"},
			{name: "CA of another kind", objs: func(tg target) []any {
				return []any{policy(tg, "Secret", "upstream-ca"), secret(seed.Namespace, "ca.crt")}
			}, policyRefs: "InvalidKind"},
			{name: "garbage in a CERTIFICATE block", objs: func(tg target) []any {
				return []any{policy(tg, "ConfigMap", "upstream-ca"), configMap(garbage)}
			}, policyRefs: "InvalidCACertificateRef"},
			{name: "credentialName Secret not in the Gateway's namespace", objs: func(tg target) []any {
				return []any{rule(tg), secret(seed.Namespace, "cacert")}
			}, tlsServer: true},
			{name: "credentialName Secret without a CA", objs: func(tg target) []any {
				return []any{rule(tg), secret(seed.GatewayNamespace, "tls.crt")}
			}, tlsServer: true},
			{name: "control: a valid CA ConfigMap", objs: func(tg target) []any {
				return []any{policy(tg, "ConfigMap", "upstream-ca"), configMap(string(ca.pem))}
			}, tlsServer: true, reached: true},
			{name: "control: the credentialName Secret in the Gateway's namespace", objs: func(tg target) []any {
				return []any{rule(tg), secret(seed.GatewayNamespace, "cacert")}
			}, tlsServer: true, reached: true},
		} {
			t.Run(tg.name+"/"+tc.name, func(t *testing.T) {
				var cert *tls.Certificate
				if tc.tlsServer {
					c := ca.serverCert(t, tg.sni)
					cert = &c
				}
				up := upstreamServer(t, tg.epp, cert)
				e := startUpstreamTLSEnv(t, systemCA, tc.objs(tg), map[string]string{"10.244.0.16:9002": up.Addr().String(), "10.244.0.20:443": up.Addr().String()})
				host := seed.Hostname
				if !tg.epp {
					host = webSNI
				}
				routeName := seed.RouteName
				if !tg.epp {
					routeName = "web"
				}
				if tc.reached {
					want := 200
					if tg.epp {
						want = 417 // the EPP's own answer
					}
					e.eventuallyStatus(t, host, want)
					if up.n.Load() == 0 {
						t.Fatal("the upstream got no connection")
					}
					e.conditionIs(t, "route ResolvedRefs", func() string { return e.routeRefs(routeName) }, "True/ResolvedRefs")
					return
				}
				e.conditionIs(t, "route ResolvedRefs", func() string { return e.routeRefs(routeName) }, "False/InvalidBackendTLS")
				if tg.epp {
					e.conditionIs(t, "pool ResolvedRefs", e.poolRefs, "False/InvalidExtensionRef")
				}
				if tc.policyRefs != "" {
					e.conditionIs(t, "policy conditions", e.policyConds, "Accepted=False/NoValidCACertificate ResolvedRefs=False/"+tc.policyRefs)
				}
				e.eventuallyStatus(t, host, 500)
				for range 3 {
					if resp := get(t, e.dp, 80, "GET", host, "/v1/models", nil); resp.StatusCode != 500 {
						t.Fatalf("status %d (%q), want 500", resp.StatusCode, bodyOf(resp))
					}
				}
				if n := up.n.Load(); n != 0 {
					t.Fatalf("the upstream got %d connection(s): its TLS setting cannot be honoured, it must get none", n)
				}
				s := e.dp.Snapshot()
				if s.Counters.NACKs != 0 {
					t.Fatalf("the data plane NACKed: %+v", s.LastNACK)
				}
				for name, c := range s.Clusters {
					if strings.HasSuffix(name, "||"+tg.service+"."+seed.Namespace+".svc.cluster.local") && c.GetTransportSocket() == nil {
						t.Errorf("cluster %s has no transport socket", name)
					}
				}
			})
		}
	}
}

// upstreamTLSEnv is the controller, an ADS server and a data plane over
// the seed Gateway, its pool route (llm.ssup2.com) and a route web
// (web.example.com) to Service web:443.
type upstreamTLSEnv struct {
	ctrl gateway.Outputs
	dp   *DataPlane
}

func startUpstreamTLSEnv(t *testing.T, systemCA string, objs []any, servers map[string]string) *upstreamTLSEnv {
	t.Helper()
	stop := krt.WithStop(t.Context().Done())
	eppSvc := seed.EPPService()
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	webRoute := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "web"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: ptr.To(gwv1.Namespace(seed.GatewayNamespace)), Name: seed.GatewayName}}},
		Hostnames:       []gwv1.Hostname{"web.example.com"},
		Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Name: "web", Port: ptr.To(gwv1.PortNumber(443))}}}}}},
	}}
	var policies []*gwv1.BackendTLSPolicy
	var cms []*corev1.ConfigMap
	var secrets []*corev1.Secret
	var rules []kubelib.DestinationRule
	for _, o := range objs {
		switch o := o.(type) {
		case *gwv1.BackendTLSPolicy:
			policies = append(policies, o)
		case *corev1.ConfigMap:
			cms = append(cms, o)
		case *corev1.Secret:
			secrets = append(secrets, o)
		case kubelib.DestinationRule:
			rules = append(rules, o)
		default:
			t.Fatalf("unsupported object %T", o)
		}
	}
	out := gateway.Build(gateway.Inputs{
		GatewayClasses:     krt.NewStaticCollection(nil, []*gwv1.GatewayClass{seed.GatewayClassObject()}, stop),
		Gateways:           krt.NewStaticCollection(nil, []*gwv1.Gateway{seed.Gateway()}, stop),
		HTTPRoutes:         krt.NewStaticCollection(nil, []*gwv1.HTTPRoute{seed.HTTPRoute(), webRoute}, stop),
		ReferenceGrants:    krt.NewStaticCollection[*gwv1.ReferenceGrant](nil, nil, stop),
		Namespaces:         krt.NewStaticCollection[*corev1.Namespace](nil, nil, stop),
		Services:           krt.NewStaticCollection(nil, []*corev1.Service{eppSvc, web}, stop),
		InferencePools:     krt.NewStaticCollection(nil, []*inferencev1.InferencePool{seed.InferencePool()}, stop),
		ConfigMaps:         krt.NewStaticCollection(nil, cms, stop),
		Secrets:            krt.NewStaticCollection(nil, secrets, stop),
		BackendTLSPolicies: krt.NewStaticCollection(nil, policies, stop),
		DestinationRules:   krt.NewStaticCollection(nil, rules, stop),
	}, gateway.Options{ControllerName: string(seed.GatewayClassObject().Spec.ControllerName), ClusterDomain: "cluster.local",
		InferenceEnabled: true, Krt: []krt.CollectionOption{stop}})

	model1 := backend(t, "model")
	servers["10.244.0.13:8000"] = model1.Listener.Addr().String()
	eps := krt.NewStaticCollection(nil, []model.ClusterEndpoints{
		{Cluster: seedShadowCluster, Endpoints: []model.Endpoint{{Address: "10.244.0.13", Port: 8000}}},
		{Cluster: seedEPPCluster, Endpoints: []model.Endpoint{{Address: "10.244.0.16", Port: 9002}}},
		{Cluster: core.ClusterName(443, "web."+seed.Namespace+".svc.cluster.local"), Endpoints: []model.Endpoint{{Address: "10.244.0.20", Port: 443}}},
	}, stop)
	srv, err := xds.NewServer(xds.Config{
		Gateways: out.Translator, Endpoints: eps, Secrets: krt.NewStaticCollection(nil, secrets, stop),
		Translate: core.Options{InferenceEnabled: true, SystemCAFile: systemCA},
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
	dp := runDP(t, testBootstrap(t, lis.Addr().String(), false), servers, Options{})
	if err := dp.WaitFor(testCtx(t), func(s Snapshot) bool { return s.Listeners[core.ListenerName(80)] != nil }); err != nil {
		t.Fatalf("listener never served: %v (last NACK %+v)", err, dp.Snapshot().LastNACK)
	}
	return &upstreamTLSEnv{ctrl: out, dp: dp}
}

// eventuallyStatus sends requests for host until one is answered want
// (the configuration converging), failing after 20 s.
func (e *upstreamTLSEnv) eventuallyStatus(t *testing.T, host string, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := get(t, e.dp, 80, "GET", host, "/v1/models", nil)
		if resp.StatusCode == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: status %d (%q), want %d; last NACK %+v", host, resp.StatusCode, bodyOf(resp), want, e.dp.Snapshot().LastNACK)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *upstreamTLSEnv) conditionIs(t *testing.T, what string, got func() string, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for got() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s, want %s", what, got(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func refs(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, "ResolvedRefs")
	if c == nil {
		return "missing"
	}
	return string(c.Status) + "/" + c.Reason
}

func (e *upstreamTLSEnv) routeRefs(name string) string {
	st := e.ctrl.HTTPRouteStatuses.GetKey(seed.Namespace + "/" + name)
	if st == nil || len(st.Parents) != 1 {
		return "no status"
	}
	return refs(st.Parents[0].Conditions)
}

func (e *upstreamTLSEnv) poolRefs() string {
	st := e.ctrl.PoolStatuses.GetKey(seed.Namespace + "/" + seed.PoolName)
	if st == nil || len(st.Parents) != 1 {
		return "no status"
	}
	return refs(st.Parents[0].Conditions)
}

func (e *upstreamTLSEnv) policyConds() string {
	st := e.ctrl.BackendTLSPolicyStatuses.GetKey(seed.Namespace + "/upstream-tls")
	if st == nil || len(st.Parents) != 1 {
		return "no ancestor"
	}
	var out []string
	for _, c := range st.Parents[0].Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(out, " ")
}
