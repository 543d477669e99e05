// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodResolvConf(t *testing.T) {
	host := parseResolvConf([]byte("# comment\nnameserver 10.255.255.53\nnameserver 10.0.0.2\ndomain old.example\nsearch corp.example lab.example\noptions timeout:2 rotate\n"))
	clusterDNS := []netip.Addr{netip.MustParseAddr("10.244.96.1")}
	pod := func(policy corev1.DNSPolicy, cfg *corev1.PodDNSConfig) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "p"}, Spec: corev1.PodSpec{DNSPolicy: policy, DNSConfig: cfg}}
	}
	cases := []struct {
		name       string
		pod        *corev1.Pod
		clusterDNS []netip.Addr
		policy     corev1.DNSPolicy
		want       string
	}{
		{"ClusterFirst is the default", pod("", nil), clusterDNS, corev1.DNSClusterFirst,
			"nameserver 10.244.96.1\nsearch infra.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\noptions ndots:5\n"},
		{"ClusterFirstWithHostNet without hostNetwork", pod(corev1.DNSClusterFirstWithHostNet, nil), clusterDNS, corev1.DNSClusterFirst,
			"nameserver 10.244.96.1\nsearch infra.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\noptions ndots:5\n"},
		{"ClusterFirst without cluster DNS falls back to Default", pod(corev1.DNSClusterFirst, nil), nil, corev1.DNSDefault,
			"nameserver 10.255.255.53\nnameserver 10.0.0.2\nsearch corp.example lab.example\noptions timeout:2 rotate\n"},
		{"Default", pod(corev1.DNSDefault, nil), clusterDNS, corev1.DNSDefault,
			"nameserver 10.255.255.53\nnameserver 10.0.0.2\nsearch corp.example lab.example\noptions timeout:2 rotate\n"},
		{"None with dnsConfig", pod(corev1.DNSNone, &corev1.PodDNSConfig{Nameservers: []string{"1.2.3.4"}, Searches: []string{"a.example"},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}}}), clusterDNS, corev1.DNSNone,
			"nameserver 1.2.3.4\nsearch a.example\noptions ndots:2 edns0\n"},
		{"ClusterFirst with dnsConfig", pod("", &corev1.PodDNSConfig{Nameservers: []string{"10.244.96.1", "1.2.3.4"}, Searches: []string{"cluster.local", "x.example"},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}, {Name: "single-request"}}}), clusterDNS, corev1.DNSClusterFirst,
			"nameserver 10.244.96.1\nnameserver 1.2.3.4\nsearch infra.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example x.example\noptions ndots:1 single-request\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			policy := dnsPolicy(tc.pod, tc.clusterDNS)
			if policy != tc.policy {
				t.Errorf("policy %s, want %s", policy, tc.policy)
			}
			if got := podDNS(tc.pod, policy, tc.clusterDNS, "cluster.local", host).String(); got != tc.want {
				t.Errorf("resolv.conf:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
