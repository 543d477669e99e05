// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package node_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testClusterDNS: a ClusterFirst pod (the default) gets the resolv.conf the
// kubelet writes, and its resolver finds a Service by its short name, by
// <svc>.<ns>.svc (as Gateway proxies name pilot-discovery) and by its full
// name, through the cluster DNS; a missing Service is "no such host". A
// Default pod keeps the host's resolv.conf.
func (c *cluster) testClusterDNS(t *testing.T) {
	ctx := context.Background()
	ns := c.namespace(t, "dns")
	svc, err := c.client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "greeter"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.create(t, appPod(ns, "first", appContainer("a", 8080)))
	def := appPod(ns, "default", appContainer("a", 8080))
	def.Spec.DNSPolicy = corev1.DNSDefault
	c.create(t, def)
	first := c.waitPod(t, ns, "first", "Running and Ready", waitBound, isReady)
	dflt := c.waitPod(t, ns, "default", "Running and Ready", waitBound, isReady)

	resolv := func(p *corev1.Pod) string {
		return httpGet(t, fmt.Sprintf("http://%s:8080/file?path=%s", p.Status.PodIP, url.QueryEscape("/etc/resolv.conf")))
	}
	want := fmt.Sprintf("nameserver %s\nsearch dns.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n", c.dnsAddr)
	if got := resolv(first); got != want {
		t.Errorf("ClusterFirst pod's /etc/resolv.conf:\n%s\nwant:\n%s", got, want)
	}
	host, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	if got := resolv(dflt); got != string(host) {
		t.Errorf("Default pod's /etc/resolv.conf:\n%s\nwant the host's:\n%s", got, host)
	}

	lookup := func(name string) (string, error) {
		return tryGet(fmt.Sprintf("http://%s:8080/lookup?host=%s", first.Status.PodIP, url.QueryEscape(name)))
	}
	wantAddrs := fmt.Sprintf("[%q]\n", svc.Spec.ClusterIP)
	for _, name := range []string{"greeter", "greeter.dns.svc", "greeter.dns.svc.cluster.local", "greeter.dns.svc.cluster.local."} {
		if got, err := lookup(name); err != nil || got != wantAddrs {
			t.Errorf("lookup %s in the pod: %q %v, want %q", name, got, err, wantAddrs)
		}
	}
	// A missing Service: NXDOMAIN, "no such host" to the resolver.
	if got, err := lookup("missing.dns.svc.cluster.local."); err == nil || !strings.Contains(err.Error(), "no such host") {
		t.Errorf("lookup missing.dns.svc.cluster.local.: %q %v, want no such host", got, err)
	}
	// Through the search list, every cluster.local try is NXDOMAIN and the
	// last try, the name as given, is outside the domain: REFUSED by this
	// test's DNS, which has no upstream, and Go's resolver reports the last
	// error. (A cluster's DNS forwards it, and the upstream's NXDOMAIN makes
	// it "no such host".)
	if got, err := lookup("missing.dns.svc"); err == nil || !strings.Contains(err.Error(), "server misbehaving") {
		t.Errorf("lookup missing.dns.svc: %q %v, want the REFUSED of the name as given (server misbehaving)", got, err)
	}
}
