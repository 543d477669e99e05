// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package model

// Endpoint is one ready address of an EDS cluster: a pod IP and the port
// traffic goes to (for a shadow Service, a pool target port).
type Endpoint struct {
	// Address is an IPv4 or IPv6 address (SocketAddress.address).
	Address string
	// Port is the destination port (SocketAddress.port_value), 1-65535.
	Port uint32
}

// ClusterEndpoints are the ready endpoints of one Envoy EDS cluster, which is
// one port of one Service: the service registry computes them from
// EndpointSlices, the ADS server serves them as a ClusterLoadAssignment. Its
// krt key is the cluster name.
type ClusterEndpoints struct {
	// Cluster is outbound|<service port>||<service FQDN>.
	Cluster string
	// Endpoints are sorted by address, then port, without duplicates. For a
	// shadow Service's first port they cover every target port of the pool.
	Endpoints []Endpoint
}

// ResourceName is the krt key: the cluster name.
func (c ClusterEndpoints) ResourceName() string { return c.Cluster }

// EPPTLS is client TLS towards a backend: an Endpoint Picker, as a
// DestinationRule (mode SIMPLE) or a Gateway API BackendTLSPolicy
// describes it, or any Service port a BackendTLSPolicy targets
// (ServiceBackend.TLS). It becomes the cluster's UpstreamTlsContext. Its
// krt key is Host.
type EPPTLS struct {
	// Host is the EPP Service FQDN the policy applies to.
	Host string
	// SNI is UpstreamTlsContext.sni; empty means the EPP host.
	SNI string
	// InsecureSkipVerify leaves out the validation context: the server
	// certificate is not verified. Ignored when CACertificates is set.
	InsecureSkipVerify bool
	// CACertificates is PEM bytes, set inline as
	// CertificateValidationContext.trusted_ca. Empty, without
	// InsecureSkipVerify, means the proxy's system trust store.
	CACertificates []byte
	// SubjectAltNames are the names the server certificate must carry, one
	// of them as a DNS SAN (match_typed_subject_alt_names, DNS, exact).
	// Empty means the SNI sent (SNI, else Host): whenever the certificate
	// is verified, its name is verified too.
	SubjectAltNames []string
	// URISubjectAltNames are URI SANs the server certificate may carry
	// instead (match_typed_subject_alt_names, URI, exact), from a
	// BackendTLSPolicy's subjectAltNames of type URI. With URI SANs and no
	// DNS ones, the SNI is not checked as a name.
	URISubjectAltNames []string
	// Source is the configuration this TLS comes from, as Istio names it in
	// a cluster's filter_metadata istio.config (what istioctl's DESTINATION
	// RULE column reads): /apis/networking.istio.io/v1/namespaces/<ns>/
	// destination-rule/<name> or /apis/gateway.networking.k8s.io/v1/
	// namespaces/<ns>/backend-tls-policy/<name>. Empty: unknown.
	Source string
}

// ResourceName is the krt key: the EPP host.
func (t EPPTLS) ResourceName() string { return t.Host }
