// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

// Where the Gateway API gives the oldest object precedence, file mode's
// creation time (pilot/pkg/config/file/doc.go, "Creation time") decides
// the same on every replica and after every restart: the creationTimestamp
// a manifest states, else namespace/name. These tests read what
// discovery -f serves over ADS.

// replica is one discovery -f over a folder, watching it.
type replica struct {
	t   *testing.T
	dir string
	p   *inProcess
}

// startReplica runs discovery -f's pipeline over dir (read in place and
// watched) until the test ends; env are feature flags (key, value, ...).
func startReplica(t *testing.T, dir string, env ...string) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	src, err := file.New(dir, file.Options{Logger: slog.New(slog.DiscardHandler), Debounce: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	feats, err := features.Load(envOf(env...))
	if err != nil {
		t.Fatal(err)
	}
	p, err := startInProcess(ctx, src, feats, dir)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(); cancel() })
	return &replica{t: t, dir: dir, p: p}
}

// fetch returns what gw's proxy is served now.
func (r *replica) fetch(gw gatewayRef) proxyResources {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.p.ads().Fetch(ctx, gw)
	if err != nil {
		r.t.Fatalf("%s: %v", r.dir, err)
	}
	return res
}

// routesFor are the Envoy route names under hostname host in every route
// configuration of res, in order.
func routesFor(res proxyResources, host string) []string {
	var out []string
	for _, rc := range res.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			for _, d := range vh.GetDomains() {
				if d == host {
					for _, r := range vh.GetRoutes() {
						out = append(out, r.GetName())
					}
				}
			}
		}
	}
	return out
}

// writeManifest writes content to dir/name atomically (beside, then
// renamed), as a ConfigMap volume swaps its files.
func writeManifest(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// nextSecond returns once the wall clock has entered a new second: loads
// on either side of it happen at different times (to the second, the
// resolution of a creationTimestamp), so a creation time taken from the
// load would differ.
func nextSecond() {
	s := time.Now().Truncate(time.Second)
	for !time.Now().Truncate(time.Second).After(s) {
		time.Sleep(10 * time.Millisecond)
	}
}

// created is a metadata line stating creationTimestamp ts, "" for none.
func created(ts string) string {
	if ts == "" {
		return ""
	}
	return "\n  creationTimestamp: " + ts
}

const sharedGateway = `apiVersion: v1
kind: Namespace
metadata:
  name: infra
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gw
  namespace: infra
spec:
  gatewayClassName: istio
  allowedListeners:
    namespaces:
      from: All
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    allowedRoutes:
      namespaces:
        from: All
`

// tenantRoute is tenant ns's HTTPRoute llm: llm.example.com, prefix /v1,
// to its Service llm; ts is the creationTimestamp it states ("" none).
func tenantRoute(ns, ts string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: llm
  namespace: %[1]s
spec:
  ports:
  - name: http
    port: 8000
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: llm
  namespace: %[1]s%[2]s
spec:
  parentRefs:
  - name: gw
    namespace: infra
  hostnames:
  - llm.example.com
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /v1
    backendRefs:
    - name: llm
      port: 8000
`, ns, created(ts))
}

var sharedGW = gatewayRef{Namespace: "infra", Name: "gw"}

// TestFileModeRouteTieStable: two tenants' routes with the same hostname
// and path conflict; the Gateway API gives the request to the oldest route,
// then to the first by namespace/name. Replica A loads team-b's route, and
// team-a's one second later (an established tenant and a newcomer); replica
// B starts with both, their files in the other order. Both serve team-a's
// rule first: neither the time of a load nor the order of files decides.
// Once team-b's manifest states a creationTimestamp, both serve team-b's
// first: a stated time is older than none.
func TestFileModeRouteTieStable(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeManifest(t, a, "00-gateway.yaml", sharedGateway)
	writeManifest(t, a, "10-team-b.yaml", tenantRoute("team-b", ""))
	ra := startReplica(t, a)
	if got := routesFor(ra.fetch(sharedGW), "llm.example.com"); len(got) != 1 || got[0] != "team-b.llm.0" {
		t.Fatalf("replica A before team-a: routes %q, want team-b's alone", got)
	}
	nextSecond()
	writeManifest(t, a, "20-team-a.yaml", tenantRoute("team-a", ""))

	writeManifest(t, b, "00-gateway.yaml", sharedGateway)
	writeManifest(t, b, "10-team-a.yaml", tenantRoute("team-a", ""))
	writeManifest(t, b, "20-team-b.yaml", tenantRoute("team-b", ""))
	nextSecond()
	rb := startReplica(t, b)

	want := func(what string, first string) {
		t.Helper()
		for _, r := range []*replica{ra, rb} {
			var got []string
			poll.UntilOr(t, 20*time.Second, fmt.Sprintf("%s: %s serves %s first", what, r.dir, first), func() bool {
				got = routesFor(r.fetch(sharedGW), "llm.example.com")
				return len(got) == 2 && got[0] == first
			}, func() string { return fmt.Sprintf("routes under llm.example.com: %q", got) })
		}
	}
	want("no creationTimestamp", "team-a.llm.0")

	// team-b states its creation time (an object exported from a cluster
	// keeps it): it is older than team-a, on both replicas.
	writeManifest(t, a, "10-team-b.yaml", tenantRoute("team-b", "2025-03-01T00:00:00Z"))
	writeManifest(t, b, "20-team-b.yaml", tenantRoute("team-b", "2025-03-01T00:00:00Z"))
	want("team-b states 2025-03-01", "team-b.llm.0")

	// Both state one: the older wins, whatever the names.
	writeManifest(t, a, "20-team-a.yaml", tenantRoute("team-a", "2024-12-31T23:59:59Z"))
	writeManifest(t, b, "10-team-a.yaml", tenantRoute("team-a", "2024-12-31T23:59:59Z"))
	want("team-a states an older time", "team-a.llm.0")
}

// tenantListenerSet is tenant ns's ListenerSet ls, listener web on port 80
// with hostname shared.example.com, and a route to it; ts is the
// ListenerSet's stated creationTimestamp ("" none).
func tenantListenerSet(ns, ts string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata:
  name: ls
  namespace: %[1]s%[2]s
spec:
  parentRef:
    name: gw
    namespace: infra
  listeners:
  - name: web
    port: 80
    protocol: HTTP
    hostname: shared.example.com
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r
  namespace: %[1]s
spec:
  parentRefs:
  - kind: ListenerSet
    name: ls
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /
`, ns, created(ts))
}

// TestFileModeListenerSetPrecedence: two tenants' ListenerSets claim one
// port and hostname; the listener of the ListenerSet first in precedence
// (oldest, then namespace/name) is served with its route, the other is
// conflicted. Without stated times team-a's wins; when team-b's ListenerSet
// states one, team-b's wins, after a restart too.
func TestFileModeListenerSetPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name, tsB, want string
	}{
		{"no creationTimestamp", "", "team-a.r.0"},
		{"team-b states one", "2025-03-01T00:00:00Z", "team-b.r.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeManifest(t, dir, "00-gateway.yaml", sharedGateway)
			writeManifest(t, dir, "10-team-b.yaml", tenantListenerSet("team-b", tc.tsB))
			writeManifest(t, dir, "20-team-a.yaml", tenantListenerSet("team-a", ""))
			for _, replica := range []string{"first start", "restart"} {
				if replica == "restart" {
					nextSecond()
				}
				got := routesFor(startReplica(t, dir).fetch(sharedGW), "shared.example.com")
				if len(got) != 1 || got[0] != tc.want {
					t.Errorf("%s: routes under shared.example.com %q, want %s alone", replica, got, tc.want)
				}
			}
		})
	}
}

// caConfigMap is ConfigMap ca of namespace ns holding the https corpus's
// certificate as ca.crt.
func caConfigMap(t *testing.T, ns string) string {
	t.Helper()
	secret, err := os.ReadFile("testdata/equivalence/https/10-certificates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body := string(secret)
	start := strings.Index(body, "-----BEGIN CERTIFICATE-----")
	end := strings.Index(body, "-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")
	if start < 0 || end < start {
		t.Fatal("no certificate in the https corpus")
	}
	// The PEM's lines after the first keep the Secret's indentation, which
	// is ca.crt's here too.
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: ca
  namespace: %s
data:
  ca.crt: |
    %s
`, ns, body[start:end])
}

// backendTLSPolicy is BackendTLSPolicy ns/name on Service service,
// validating hostname host against ConfigMap ca; ts is the
// creationTimestamp it states ("" none).
func backendTLSPolicy(ns, name, service, host, ts string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata:
  name: %s
  namespace: %s%s
spec:
  targetRefs:
  - group: ""
    kind: Service
    name: %s
  validation:
    hostname: %s
    caCertificateRefs:
    - group: ""
      kind: ConfigMap
      name: ca
`, name, ns, created(ts), service, host)
}

// tenantBackendTLS is Service app (port 8443) of namespace team, a route to
// it, and BackendTLSPolicies p-a (hostname a.internal) and p-b (b.internal,
// stating creationTimestamp tsB) on it.
func tenantBackendTLS(t *testing.T, tsB string) string {
	t.Helper()
	return caConfigMap(t, "team") + `---
apiVersion: v1
kind: Service
metadata:
  name: app
  namespace: team
spec:
  ports:
  - name: https
    port: 8443
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: app
  namespace: team
spec:
  parentRefs:
  - name: gw
    namespace: infra
  hostnames:
  - app.example.com
  rules:
  - backendRefs:
    - name: app
      port: 8443
---
` + backendTLSPolicy("team", "p-a", "app", "a.internal", "") + "---\n" + backendTLSPolicy("team", "p-b", "app", "b.internal", tsB)
}

// sniOf is the SNI the cluster named cluster sends upstream.
func sniOf(t *testing.T, res proxyResources, cluster string) string {
	t.Helper()
	for _, c := range res.Clusters {
		if c.GetName() != cluster {
			continue
		}
		ts := c.GetTransportSocket()
		if ts == nil {
			t.Fatalf("cluster %s has no transport socket: plaintext", cluster)
		}
		tc := &tlsv3.UpstreamTlsContext{}
		if err := ts.GetTypedConfig().UnmarshalTo(tc); err != nil {
			t.Fatal(err)
		}
		return tc.GetSni()
	}
	var names []string
	for _, c := range res.Clusters {
		names = append(names, c.GetName())
	}
	t.Fatalf("no cluster %s among %q", cluster, names)
	return ""
}

// TestFileModeBackendTLSPolicyPrecedence: of two BackendTLSPolicies on one
// Service, the oldest applies, then the first by name: p-a's hostname is
// the SNI without stated times; p-b's once p-b states a creationTimestamp.
// The same for a route's Service backend and for an InferencePool's EPP
// (the seed's, whose DestinationRule a BackendTLSPolicy overrides).
func TestFileModeBackendTLSPolicyPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name, tsB, want string
	}{
		{"no creationTimestamp", "", "a.internal"},
		{"p-b states one", "2025-03-01T00:00:00Z", "b.internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeManifest(t, dir, "00-gateway.yaml", sharedGateway)
			writeManifest(t, dir, "10-team.yaml", tenantBackendTLS(t, tc.tsB))
			const cluster = "outbound|8443||app.team.svc.cluster.local"
			if got := sniOf(t, startReplica(t, dir).fetch(sharedGW), cluster); got != tc.want {
				t.Errorf("Service backend: SNI of %s = %q, want %q", cluster, got, tc.want)
			}

			seed := copySeed(t)
			const epp = "vllm-llama3-8b-epp"
			writeManifest(t, seed, "50-epp-tls.yaml", caConfigMap(t, "llm-namespace")+"---\n"+
				backendTLSPolicy("llm-namespace", "p-a", epp, "a.internal", "")+"---\n"+
				backendTLSPolicy("llm-namespace", "p-b", epp, "b.internal", tc.tsB))
			gw := gatewayRef{Namespace: "gateway-namespace", Name: "gateway"}
			if got := sniOf(t, startReplica(t, seed, inference...).fetch(gw), seedEPPCluster); got != tc.want {
				t.Errorf("EPP: SNI of %s = %q, want %q", seedEPPCluster, got, tc.want)
			}
		})
	}
}
