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

// EPPTLS is client TLS towards an upstream: an Endpoint Picker
// (EPPBackend.TLS), a Service port a route sends to (ServiceBackend.TLS)
// or mirrors to (Rule.Mirrors), as the one BackendTLSPolicy or
// DestinationRule that applies to that Service port asks for it
// (pilot/pkg/config/kube/upstreamtls decides which, and fails closed: a
// setting it cannot honour never reaches the model). It becomes the
// cluster's UpstreamTlsContext. Its krt key is Host.
type EPPTLS struct {
	// Host is the FQDN of the Service the TLS applies to.
	Host string
	// SNI is UpstreamTlsContext.sni; empty means Host.
	SNI string
	// InsecureSkipVerify leaves out the validation context: the server
	// certificate is not verified. Ignored when CACertificates or
	// CredentialName is set.
	InsecureSkipVerify bool
	// CACertificates is PEM bytes (CERTIFICATE blocks, each one a
	// certificate that parses), set inline as
	// CertificateValidationContext.trusted_ca. Empty, without
	// InsecureSkipVerify or CredentialName, means the proxy's system trust
	// store, which only an explicit choice asks for (a BackendTLSPolicy's
	// wellKnownCACertificates System, a DestinationRule naming no CA).
	CACertificates []byte
	// CredentialName is a DestinationRule's tls.credentialName: the CA
	// bundle is read from that Secret in the namespace of the proxy that
	// uses it, the Gateway's (CredentialCAs), as Istio reads it.
	CredentialName string
	// CredentialCAs are, per Gateway namespace, CredentialName's CA bundle
	// read there, or why it could not be. A Gateway whose namespace has no
	// bundle here never reaches the upstream: its share of requests is
	// answered 500 (CAFor).
	CredentialCAs map[string]CredentialCA
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

// CredentialCA is a DestinationRule credentialName's CA bundle as read in
// one Gateway namespace: PEM, or the Problem that kept it from being read.
type CredentialCA struct {
	PEM     []byte
	Problem string
}

// ResourceName is the krt key: the host.
func (t EPPTLS) ResourceName() string { return t.Host }

// CAFor is the CA bundle a proxy of a Gateway in namespace gatewayNamespace
// verifies the upstream with: CACertificates, or, with CredentialName, the
// bundle read in that namespace. ok is false when the CA could not be had
// there: the upstream must then not be reached at all (never without TLS,
// never against another trust store); problem says why. An empty ca with
// ok means no CA was asked for (InsecureSkipVerify, or the system trust
// store).
func (t *EPPTLS) CAFor(gatewayNamespace string) (ca []byte, ok bool, problem string) {
	if t.CredentialName == "" {
		return t.CACertificates, true, ""
	}
	c, found := t.CredentialCAs[gatewayNamespace]
	switch {
	case !found:
		return nil, false, "credentialName " + t.CredentialName + " was not read in namespace " + gatewayNamespace
	case len(c.PEM) == 0:
		return nil, false, c.Problem
	}
	return c.PEM, true, ""
}
