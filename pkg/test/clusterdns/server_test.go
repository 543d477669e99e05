// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package clusterdns

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func service(ns, name, clusterIP string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: clusterIP}}
}

func slice(ns, svc, name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
	}
}

func endpoint(addr string, ready *bool, host string) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if host != "" {
		ep.Hostname = &host
	}
	return ep
}

// startServer serves objs on 127.0.0.1 with the given upstreams.
func startServer(t *testing.T, upstream []string, objs ...runtime.Object) *Server {
	t.Helper()
	s, err := Start(context.Background(), Config{Client: fake.NewClientset(objs...), Addr: "127.0.0.1:0", Upstream: upstream})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// query asks addr over network; it returns the rcode, the answers as
// "type value" strings, and the authoritative bit.
func query(t *testing.T, network, addr, name string, qtype uint16) (string, []string, bool) {
	t.Helper()
	m := new(dns.Msg).SetQuestion(name, qtype)
	resp, _, err := (&dns.Client{Net: network}).Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s: %v", network, name, err)
	}
	var answers []string
	for _, rr := range resp.Answer {
		if !strings.EqualFold(rr.Header().Name, name) || rr.Header().Ttl != ttl {
			t.Errorf("%s: answer %v: want owner %s, TTL %d", name, rr, name, ttl)
		}
		switch v := rr.(type) {
		case *dns.A:
			answers = append(answers, "A "+v.A.String())
		case *dns.CNAME:
			answers = append(answers, "CNAME "+v.Target)
		default:
			answers = append(answers, rr.String())
		}
	}
	slices.Sort(answers)
	return dns.RcodeToString[resp.Rcode], answers, resp.Authoritative
}

func TestServiceRecords(t *testing.T) {
	ext := service("ns", "ext", "")
	ext.Spec.Type = corev1.ServiceTypeExternalName
	ext.Spec.ExternalName = "example.com"
	s := startServer(t, nil,
		service("infermesh-system", "pilot-discovery", "10.96.0.20"),
		service("ns", "headless", corev1.ClusterIPNone),
		slice("ns", "headless", "headless-a",
			endpoint("10.244.1.2", ptr.To(true), "web-0"), endpoint("10.244.1.3", nil, ""), endpoint("10.244.1.4", ptr.To(false), "web-2")),
		slice("ns", "headless", "headless-b", endpoint("10.244.1.3", ptr.To(true), "")),
		service("ns", "empty", corev1.ClusterIPNone),
		slice("ns", "empty", "empty-a", endpoint("10.244.1.9", ptr.To(false), "")),
		ext,
	)
	cases := []struct {
		name  string
		qtype uint16
		rcode string
		want  []string
	}{
		{"pilot-discovery.infermesh-system.svc.cluster.local.", dns.TypeA, "NOERROR", []string{"A 10.96.0.20"}},
		{"Pilot-Discovery.INFERMESH-system.svc.cluster.local.", dns.TypeA, "NOERROR", []string{"A 10.96.0.20"}},
		{"pilot-discovery.infermesh-system.svc.cluster.local.", dns.TypeAAAA, "NOERROR", nil},
		{"headless.ns.svc.cluster.local.", dns.TypeA, "NOERROR", []string{"A 10.244.1.2", "A 10.244.1.3"}},
		{"web-0.headless.ns.svc.cluster.local.", dns.TypeA, "NOERROR", []string{"A 10.244.1.2"}},
		{"web-2.headless.ns.svc.cluster.local.", dns.TypeA, "NXDOMAIN", nil},
		{"empty.ns.svc.cluster.local.", dns.TypeA, "NXDOMAIN", nil},
		{"ext.ns.svc.cluster.local.", dns.TypeA, "NOERROR", []string{"CNAME example.com."}},
		{"missing.ns.svc.cluster.local.", dns.TypeA, "NXDOMAIN", nil},
		// The search list's first tries for a name with fewer than 5 dots.
		{"pilot-discovery.infermesh-system.svc.ns.svc.cluster.local.", dns.TypeA, "NXDOMAIN", nil},
		{"pilot-discovery.infermesh-system.svc.svc.cluster.local.", dns.TypeA, "NXDOMAIN", nil},
		{"ns.svc.cluster.local.", dns.TypeA, "NXDOMAIN", nil},
		{"10-244-1-2.ns.pod.cluster.local.", dns.TypeA, "NXDOMAIN", nil},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			rcode, got, aa := query(t, network, s.Addr(), tc.name, tc.qtype)
			if rcode != tc.rcode || !slices.Equal(got, tc.want) || !aa {
				t.Errorf("%s %s %s: %s %v authoritative=%v, want %s %v authoritative", network, tc.name, dns.TypeToString[tc.qtype], rcode, got, aa, tc.rcode, tc.want)
			}
		}
	}
}

// TestOutsideTheDomain: refused without upstreams, forwarded with one.
func TestOutsideTheDomain(t *testing.T) {
	// The upstream is another cluster DNS, whose domain is "example": any
	// server that answers for the name will do.
	up, err := Start(context.Background(), Config{Client: fake.NewClientset(service("other", "svc", "10.96.0.30")), Addr: "127.0.0.1:0", Domain: "example"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Stop)

	refusing := startServer(t, nil)
	if rcode, got, _ := query(t, "udp", refusing.Addr(), "svc.other.svc.example.", dns.TypeA); rcode != "REFUSED" || got != nil {
		t.Errorf("without upstreams: %s %v, want REFUSED", rcode, got)
	}
	forwarding := startServer(t, []string{up.Addr()})
	for _, network := range []string{"udp", "tcp"} {
		if rcode, got, _ := query(t, network, forwarding.Addr(), "svc.other.svc.example.", dns.TypeA); rcode != "NOERROR" || !slices.Equal(got, []string{"A 10.96.0.30"}) {
			t.Errorf("%s forwarded: %s %v, want NOERROR [A 10.96.0.30]", network, rcode, got)
		}
	}
	dead := startServer(t, []string{"127.0.0.1:1"})
	if rcode, _, _ := query(t, "tcp", dead.Addr(), "svc.other.svc.example.", dns.TypeA); rcode != "SERVFAIL" {
		t.Errorf("upstream down: %s, want SERVFAIL", rcode)
	}
}

// TestFollowsTheAPI: a Service created, changed and deleted after the start.
func TestFollowsTheAPI(t *testing.T) {
	client := fake.NewClientset()
	s, err := Start(context.Background(), Config{Client: client, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	name := "late.ns.svc.cluster.local."
	svcs := client.CoreV1().Services("ns")
	ctx := context.Background()
	eventually := func(want string) {
		t.Helper()
		var rcode string
		var got []string
		for range 100 {
			if rcode, got, _ = query(t, "udp", s.Addr(), name, dns.TypeA); strings.Join(append([]string{rcode}, got...), " ") == want {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s: %s %v, want %s", name, rcode, got, want)
	}
	eventually("NXDOMAIN")
	if _, err := svcs.Create(ctx, service("ns", "late", "10.96.0.40"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("NOERROR A 10.96.0.40")
	if err := svcs.Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("NXDOMAIN")
}

func TestUpstreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("# host\nnameserver 10.255.255.53\nnameserver 10.0.0.2\nsearch example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Upstreams(path)
	if err != nil || !slices.Equal(got, []string{"10.255.255.53:53", "10.0.0.2:53"}) {
		t.Errorf("Upstreams: %v %v", got, err)
	}
}
