// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package clusterdns is the cluster DNS of one-machine test clusters: the
// part of CoreDNS's kubernetes plugin that pods need to reach Services by
// name, fed from the API server by informers (Services, EndpointSlices).
// The wire format is github.com/miekg/dns's (the library CoreDNS is built
// on); this package holds only the record rules.
//
// Answers (Kubernetes DNS-Based Service Discovery specification, the
// subset implemented):
//
//   - <service>.<namespace>.svc.<domain> A: the ClusterIP; for a headless
//     Service (clusterIP None) the IPv4 addresses of its ready endpoints,
//     from its EndpointSlices; for an ExternalName Service a CNAME to the
//     external name (not chased).
//   - <hostname>.<service>.<namespace>.svc.<domain> A: the ready endpoint of
//     a headless Service whose EndpointSlice entry carries that hostname.
//   - An existing name asked for another type (AAAA, SRV, TXT, ...): NOERROR
//     with no answer (this cluster is IPv4 only). Any other name under the
//     domain (pod records, SRV names, bare namespaces): NXDOMAIN.
//     Answers under the domain are authoritative, with a TTL of 5 s
//     (CoreDNS's default).
//   - Names outside the domain are forwarded to the upstream servers given
//     (the host's resolv.conf, as CoreDNS's `forward . /etc/resolv.conf`),
//     or REFUSED when there are none.
//
// Start serves UDP and TCP on one address until Stop. See
// architecture/node.md, "Cluster DNS", for how the node agent points pods at
// it.
//
// # Files
//
//   - server.go: Config, Start and Server: the informers, UDP and TCP on one
//     address, Stop; Upstreams from a resolv.conf.
//   - handler.go: one query answered: authoritatively under the zone, else
//     forwarded or REFUSED.
//   - records.go: the records under the cluster domain, read from the
//     informers' Services and EndpointSlices.
package clusterdns
