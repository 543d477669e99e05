// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package upstreamtls

import (
	"fmt"
	"slices"
	"strings"
	"time"

	kubelib "github.com/infermesh/infermesh/pkg/kube"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// Rule is one Istio DestinationRule resolved: the Service host it names
// and the client TLS it asks for.
type Rule struct {
	Namespace, Name string
	Created         time.Time
	// Host is the Service FQDN spec.host names (DestinationRuleHost), ""
	// when it names none.
	Host string
	// TLS is spec.trafficPolicy.tls (Host and Source set by Resolve); nil
	// for mode DISABLE (or none), and when Problem is set.
	TLS *model.EPPTLS
	// Problem is why the TLS the rule asks for cannot be honoured, naming
	// the rule and the field; a port the rule wins is then not reached.
	Problem string
	// Warnings are settings the rule asks for that are not applied but do
	// not weaken the connection (its callers log them once per change).
	Warnings []string
}

// ResourceName is the krt key: namespace/name.
func (r Rule) ResourceName() string { return r.Namespace + "/" + r.Name }

// DestinationRuleHost is the Service FQDN a DestinationRule's spec.host
// names: a short name (no dot) is a Service in the rule's namespace,
// <host>.<namespace>.svc.<domain>; a name with a dot is taken as written
// (as Istio does, so "name.namespace" matches nothing). Wildcard hosts
// ("*...") are not supported and name nothing ("").
func DestinationRuleHost(dr kubelib.DestinationRule, clusterDomain string) string {
	h := dr.Host
	switch {
	case h == "" || strings.HasPrefix(h, "*"):
		return ""
	case !strings.Contains(h, "."):
		return h + "." + dr.Namespace + ".svc." + clusterDomain
	}
	return h
}

// ResolveRule resolves a DestinationRule's client TLS
// (spec.trafficPolicy.tls; portLevelSettings and subsets are not read):
//
//   - DISABLE, or no tls: no TLS (nil).
//   - SIMPLE with insecureSkipVerify: TLS without verification.
//   - SIMPLE with credentialName: the CA is read from that Secret in each
//     Gateway's namespace (Resolve, CredentialCA), where Istio reads it.
//   - SIMPLE with caCertificates (a file path on Istio's proxies): a
//     Problem. Gateway proxies here have no such file, and falling back to
//     the system trust store would trust CAs the rule did not name.
//   - SIMPLE naming no CA: the proxy's system trust store (Istio: the OS
//     CA certificates).
//
// sni and subjectAltNames are carried as is: whenever the certificate is
// verified its name is too, against subjectAltNames or, when the rule names
// none, the SNI sent. A subjectAltNames entry that is not a DNS name (a
// spiffe:// URI) is matched as a DNS name only, so no certificate matches
// it (a warning; Istio would also match it as a URI SAN).
//
// MUTUAL and ISTIO_MUTUAL ask for a client certificate, which
// pilot-discovery cannot deliver (no mesh identity); they give TLS as
// SIMPLE would, without a client certificate, and a warning: the user
// asked for encryption, so plaintext would be a silent downgrade, while an
// upstream that requires a client certificate refuses the handshake
// visibly.
func ResolveRule(dr kubelib.DestinationRule, clusterDomain string) Rule {
	r := Rule{Namespace: dr.Namespace, Name: dr.Name, Created: dr.Created, Host: DestinationRuleHost(dr, clusterDomain)}
	if dr.TLS == nil {
		return r
	}
	const at = "spec.trafficPolicy.tls"
	c := dr.TLS
	switch c.Mode {
	case kubelib.TLSModeSimple:
	case kubelib.TLSModeMutual, kubelib.TLSModeIstioMutual:
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s.mode %s asks for a client certificate, which is not supported: the upstream is reached with TLS and no client certificate", at, c.Mode))
	default:
		return r
	}
	for _, san := range c.SubjectAltNames {
		if strings.Contains(san, ":") || strings.Contains(san, "/") {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s.subjectAltNames entry %q is not a DNS name; it is matched as a DNS name only, so no certificate will match it", at, san))
		}
	}
	t := &model.EPPTLS{SNI: c.SNI, SubjectAltNames: slices.Clone(c.SubjectAltNames)}
	switch {
	case c.InsecureSkipVerify:
		t.InsecureSkipVerify = true
	case c.CredentialName != "":
		t.CredentialName = c.CredentialName
	case c.CACertificates != "":
		r.Problem = fmt.Sprintf("DestinationRule %s: %s.caCertificates: %q is a file on the proxy, which Gateway proxies here do not have: "+
			"name a Secret with the CA bundle (key cacert or ca.crt) in the Gateway's namespace in credentialName, or use a BackendTLSPolicy",
			r.ResourceName(), at, c.CACertificates)
		return r
	}
	r.TLS = t
	return r
}

// winningRule is the rule for a Service of namespace ns among rules (all
// for its host): one in ns first, then the oldest, then by namespace/name.
func winningRule(rules []Rule, ns string) Rule {
	return slices.MinFunc(rules, func(a, b Rule) int {
		if (a.Namespace == ns) != (b.Namespace == ns) {
			if a.Namespace == ns {
				return -1
			}
			return 1
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ResourceName(), b.ResourceName())
	})
}
