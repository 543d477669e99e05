// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package clusterdns

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// ttl is the TTL of every answer under the domain (CoreDNS's kubernetes
// plugin's default).
const ttl = 5

// byService indexes EndpointSlices by "<namespace>/<service name>".
const byService = "service"

func serviceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelServiceName] == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
}

// records answers names under the cluster domain from the informers' stores.
type records struct {
	// suffix is ".svc.<domain>." in lower case.
	suffix   string
	services cache.Store
	slices   cache.Indexer
}

// answer returns the rcode and the answer records for name (fully
// qualified, any case) and qtype.
func (r *records) answer(name string, qtype uint16) (int, []dns.RR) {
	lower := strings.ToLower(name)
	if !strings.HasSuffix(lower, r.suffix) {
		return dns.RcodeNameError, nil
	}
	labels := strings.Split(strings.TrimSuffix(lower, r.suffix), ".")
	var rrs []dns.RR
	var found bool
	switch len(labels) {
	case 2: // <service>.<namespace>
		rrs, found = r.service(name, labels[1], labels[0])
	case 3: // <hostname>.<service>.<namespace>
		rrs, found = r.endpointHost(name, labels[2], labels[1], labels[0])
	}
	if !found {
		return dns.RcodeNameError, nil
	}
	return dns.RcodeSuccess, ofType(rrs, qtype)
}

// ofType keeps the records of qtype; a CNAME answers every type.
func ofType(rrs []dns.RR, qtype uint16) []dns.RR {
	return slices.DeleteFunc(rrs, func(rr dns.RR) bool {
		t := rr.Header().Rrtype
		return t != qtype && t != dns.TypeCNAME
	})
}

func (r *records) lookupService(ns, name string) *corev1.Service {
	obj, ok, err := r.services.GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	svc, _ := obj.(*corev1.Service)
	return svc
}

// service: the ClusterIP, the ready endpoints of a headless Service (the
// name exists only while it has some), or an ExternalName's CNAME.
func (r *records) service(qname, ns, name string) ([]dns.RR, bool) {
	svc := r.lookupService(ns, name)
	switch {
	case svc == nil:
		return nil, false
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return []dns.RR{&dns.CNAME{Hdr: header(qname, dns.TypeCNAME), Target: dns.Fqdn(svc.Spec.ExternalName)}}, true
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		addrs := r.readyEndpoints(ns, name, "")
		return aRecords(qname, addrs), len(addrs) > 0
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !ip.Is4() {
		return nil, true // no address yet, or IPv6 only: the name exists, no A
	}
	return aRecords(qname, []netip.Addr{ip}), true
}

// endpointHost: the ready endpoint of a headless Service with that hostname.
func (r *records) endpointHost(qname, ns, name, host string) ([]dns.RR, bool) {
	svc := r.lookupService(ns, name)
	if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return nil, false
	}
	addrs := r.readyEndpoints(ns, name, host)
	return aRecords(qname, addrs), len(addrs) > 0
}

// readyEndpoints are the IPv4 addresses of the Service's ready endpoints
// (ready unset counts as ready, as EndpointConditions documents), sorted,
// without repeats; with host set, only the endpoints of that hostname.
func (r *records) readyEndpoints(ns, name, host string) []netip.Addr {
	objs, err := r.slices.ByIndex(byService, ns+"/"+name)
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, obj := range objs {
		s := obj.(*discoveryv1.EndpointSlice)
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if host != "" && (ep.Hostname == nil || !strings.EqualFold(*ep.Hostname, host)) {
				continue
			}
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
					out = append(out, ip)
				}
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

func aRecords(qname string, addrs []netip.Addr) []dns.RR {
	out := make([]dns.RR, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, &dns.A{Hdr: header(qname, dns.TypeA), A: a.AsSlice()})
	}
	return out
}

func header(qname string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: qname, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
}
