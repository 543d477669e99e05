// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DNS: the kubelet gives each pod a resolv.conf by its dnsPolicy
// (pkg/kubelet/network/dns/dns.go, GetPodDNS) and the runtime bind-mounts
// it at /etc/resolv.conf in every container. This node does the same:
// podDNS builds the file's content, writeResolvConf writes it into the
// pod's folder, and containerMounts binds it over /etc/resolv.conf in each
// container's mount namespace (mounts.go).
//
//   - ClusterFirst (the default) and ClusterFirstWithHostNet (this node has
//     no hostNetwork pods): nameservers = Config.ClusterDNS (the kubelet's
//     --cluster-dns), search <ns>.svc.<domain> svc.<domain> <domain> followed
//     by the host's search domains, options ndots:5. With no ClusterDNS
//     configured the kubelet falls back to Default with a MissingClusterDNS
//     Warning event; so does this node.
//   - Default: the host's resolv.conf (Config.HostResolvConf, the kubelet's
//     --resolv-conf). Without a dnsConfig the container sees the host's file
//     itself (no mount), which has the same content.
//   - None: only what dnsConfig gives.
//
// A pod's dnsConfig then adds nameservers and search domains (without
// repeats) and options (a later option of the same name replaces the
// earlier), as the kubelet's appendDNSConfig does.

// resolvConfPath is where containers see the file.
const resolvConfPath = "/etc/resolv.conf"

// dnsSettings is the content of one resolv.conf.
type dnsSettings struct {
	nameservers, searches, options []string
}

// String renders the file as the kubelet does: nameserver lines, then one
// search line and one options line when there are any.
func (d dnsSettings) String() string {
	var b strings.Builder
	for _, ns := range d.nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(d.searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(d.searches, " "))
	}
	if len(d.options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(d.options, " "))
	}
	return b.String()
}

// parseResolvConf reads the nameserver, search (or domain) and options
// lines of a resolv.conf; the last search or domain line wins, as in the
// resolver and the kubelet's parser.
func parseResolvConf(content []byte) dnsSettings {
	var d dnsSettings
	sc := bufio.NewScanner(bytes.NewReader(content))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				d.nameservers = append(d.nameservers, f[1])
			}
		case "search", "domain":
			d.searches = slices.Clone(f[1:])
		case "options":
			d.options = append(d.options, f[1:]...)
		}
	}
	return d
}

// dnsPolicy is the policy the kubelet applies to pod given the cluster DNS
// servers: ClusterFirst, Default or None.
func dnsPolicy(pod *corev1.Pod, clusterDNS []netip.Addr) corev1.DNSPolicy {
	switch pod.Spec.DNSPolicy {
	case corev1.DNSNone, corev1.DNSDefault:
		return pod.Spec.DNSPolicy
	}
	if len(clusterDNS) == 0 {
		return corev1.DNSDefault
	}
	return corev1.DNSClusterFirst
}

// podDNS is pod's resolv.conf under policy (dnsPolicy's), with host the
// host's resolv.conf settings.
func podDNS(pod *corev1.Pod, policy corev1.DNSPolicy, clusterDNS []netip.Addr, domain string, host dnsSettings) dnsSettings {
	var d dnsSettings
	switch policy {
	case corev1.DNSClusterFirst:
		for _, a := range clusterDNS {
			d.nameservers = append(d.nameservers, a.String())
		}
		d.searches = withoutRepeats(append([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, host.searches...))
		d.options = []string{"ndots:5"}
	case corev1.DNSDefault:
		d = host
	}
	if c := pod.Spec.DNSConfig; c != nil {
		d.nameservers = withoutRepeats(append(slices.Clone(d.nameservers), c.Nameservers...))
		d.searches = withoutRepeats(append(slices.Clone(d.searches), c.Searches...))
		d.options = mergeOptions(d.options, c.Options)
	}
	return d
}

func withoutRepeats(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// mergeOptions adds the pod's options to base; one of the same name
// replaces the earlier, in its place.
func mergeOptions(base []string, extra []corev1.PodDNSConfigOption) []string {
	out := slices.Clone(base)
	for _, o := range extra {
		v := o.Name
		if o.Value != nil {
			v += ":" + *o.Value
		}
		if i := slices.IndexFunc(out, func(s string) bool { n, _, _ := strings.Cut(s, ":"); return n == o.Name }); i >= 0 {
			out[i] = v
		} else {
			out = append(out, v)
		}
	}
	return out
}

// writeResolvConf writes the pod's resolv.conf into dir and returns its
// path; "" when the containers keep the host's (Default, no dnsConfig).
func (n *provider) writeResolvConf(p *podRuntime, pod *corev1.Pod, dir string) (string, error) {
	policy := dnsPolicy(pod, n.cfg.ClusterDNS)
	if policy == corev1.DNSDefault && pod.Spec.DNSPolicy != corev1.DNSDefault {
		p.event(corev1.EventTypeWarning, "MissingClusterDNS",
			"pod: %q. kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			pod.Namespace+"/"+pod.Name, dnsPolicyOrDefault(pod), corev1.DNSDefault)
	}
	if policy == corev1.DNSDefault && pod.Spec.DNSConfig == nil {
		return "", nil
	}
	var host dnsSettings
	if policy != corev1.DNSNone {
		b, err := os.ReadFile(n.cfg.HostResolvConf)
		if err != nil {
			return "", fmt.Errorf("host resolv.conf: %w", err)
		}
		host = parseResolvConf(b)
	}
	path := filepath.Join(dir, "resolv.conf")
	content := podDNS(pod, policy, n.cfg.ClusterDNS, n.cfg.ClusterDomain, host).String()
	return path, os.WriteFile(path, []byte(content), 0o644)
}

func dnsPolicyOrDefault(pod *corev1.Pod) corev1.DNSPolicy {
	if pod.Spec.DNSPolicy == "" {
		return corev1.DNSClusterFirst
	}
	return pod.Spec.DNSPolicy
}
