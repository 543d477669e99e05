// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package upstreamtls

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// Port is one Service port an upstream is reached on.
type Port struct {
	Service types.NamespacedName
	// Name is the Service port's name, "" when it has none (then only
	// policies naming the whole Service apply).
	Name string
	// Host is the Service's FQDN.
	Host string
}

// Sources are the settings that may give a port TLS, and what reading
// them needs.
type Sources struct {
	// Policies are the BackendTLSPolicies that target the port's Service.
	Policies []Policy
	// Rules are the DestinationRules whose Host is the port's host.
	Rules []Rule
	// GatewayNamespaces are the namespaces of the Gateways whose proxies
	// use the port: a DestinationRule's credentialName is read in each.
	GatewayNamespaces []string
	// Secret looks a Secret up, nil when absent (credentialName).
	Secret func(key types.NamespacedName) *corev1.Secret
}

// Result is the client TLS of one port: TLS (nil for plaintext), or the
// Problem that keeps the port from being reached at all.
type Result struct {
	TLS     *model.EPPTLS
	Problem string
}

// ProblemIn is why a Gateway in namespace gatewayNamespace must not reach
// the port: Problem, or the credentialName CA that could not be read
// there; "" when it may.
func (r Result) ProblemIn(gatewayNamespace string) string {
	if r.Problem != "" || r.TLS == nil {
		return r.Problem
	}
	_, _, problem := r.TLS.CAFor(gatewayNamespace)
	return problem
}

// Resolve is the client TLS of port from src, by the one precedence rule
// (the package doc): the winning BackendTLSPolicy's TLS or its Problem;
// else the winning DestinationRule's TLS (its credentialName CA read in
// each Gateway namespace) or its Problem; else plaintext. The TLS returned
// is a new value with Host set to the port's host and Source naming the
// configuration.
func Resolve(port Port, src Sources) Result {
	if p, ok := WinningPolicy(src.Policies, port.Service, port.Name); ok {
		if p.TLS == nil {
			return Result{Problem: p.Problem()}
		}
		t := *p.TLS
		t.Host, t.Source = port.Host, BackendTLSPolicySource(p.Namespace, p.Name)
		return Result{TLS: &t}
	}
	if len(src.Rules) == 0 {
		return Result{}
	}
	r := winningRule(src.Rules, port.Service.Namespace)
	if r.Problem != "" {
		return Result{Problem: r.Problem}
	}
	if r.TLS == nil {
		return Result{}
	}
	t := *r.TLS
	t.Host, t.Source = port.Host, DestinationRuleSource(r.Namespace, r.Name)
	if t.CredentialName != "" {
		t.CredentialCAs = map[string]model.CredentialCA{}
		for _, ns := range src.GatewayNamespaces {
			if _, done := t.CredentialCAs[ns]; done {
				continue
			}
			ca, err := CredentialCA(ns, t.CredentialName, src.Secret)
			if err != nil {
				t.CredentialCAs[ns] = model.CredentialCA{Problem: fmt.Sprintf("DestinationRule %s: spec.trafficPolicy.tls.credentialName: %v",
					r.ResourceName(), err)}
				continue
			}
			t.CredentialCAs[ns] = model.CredentialCA{PEM: ca}
		}
	}
	return Result{TLS: &t}
}

// WinningPolicy is the policy that applies to port portName of Service svc
// among policies: the oldest naming the port, else the oldest naming the
// Service as a whole (creationTimestamp, then namespace/name); false when
// none applies.
func WinningPolicy(policies []Policy, svc types.NamespacedName, portName string) (Policy, bool) {
	sections := []string{""}
	if portName != "" {
		sections = []string{portName, ""}
	}
	for _, section := range sections {
		var cands []Policy
		for _, p := range policies {
			if slices.Contains(p.Targets, Target{Service: svc, Section: section}) {
				cands = append(cands, p)
			}
		}
		if len(cands) > 0 {
			return slices.MinFunc(cands, OlderPolicy), true
		}
	}
	return Policy{}, false
}

// OlderPolicy orders policies by precedence: the oldest first, then by
// namespace/name.
func OlderPolicy(a, b Policy) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.ResourceName(), b.ResourceName())
}

// CredentialCA is the CA bundle of a DestinationRule's credentialName as a
// proxy in namespace reads it, which is where Istio reads it (the Secret
// "must exist in the namespace of the proxy using the certificates"): the
// Secret <name>-cacert if it exists, else the Secret <name>; in it, key
// cacert, else key ca.crt (Istio's SDS for <name>-cacert,
// pilot/pkg/credentials/kube/secrets.go GetCaCert and ExtractRoot). The
// bundle must pass core.ParseCABundle. secret may be nil (no Secrets).
func CredentialCA(namespace, name string, secret func(types.NamespacedName) *corev1.Secret) ([]byte, error) {
	get := func(n string) *corev1.Secret {
		if secret == nil {
			return nil
		}
		return secret(types.NamespacedName{Namespace: namespace, Name: n})
	}
	s := get(name + "-cacert")
	if s == nil {
		if s = get(name); s == nil {
			return nil, fmt.Errorf("neither Secret %s/%s-cacert nor %s/%s exists (the CA is read in the Gateway's namespace, %s)",
				namespace, name, namespace, name, namespace)
		}
	}
	var data []byte
	key := ""
	for _, k := range []string{"cacert", CACertificateKey} {
		if v := s.Data[k]; len(v) > 0 {
			data, key = v, k
			break
		}
	}
	if key == "" {
		return nil, fmt.Errorf("the Secret %s/%s has no CA bundle: neither key cacert nor %s is set", namespace, s.Name, CACertificateKey)
	}
	ca, err := core.ParseCABundle(data)
	if err != nil {
		return nil, fmt.Errorf("key %s of the Secret %s/%s: %w", key, namespace, s.Name, err)
	}
	return ca, nil
}

// DestinationRuleSource is a DestinationRule's model.EPPTLS.Source, the
// config path Istio writes into a cluster's istio.config metadata
// (pilot/pkg/networking/util's BuildConfigInfoMetadata in Istio).
func DestinationRuleSource(namespace, name string) string {
	return "/apis/networking.istio.io/v1/namespaces/" + namespace + "/destination-rule/" + name
}

// BackendTLSPolicySource is a BackendTLSPolicy's model.EPPTLS.Source, in
// the same form.
func BackendTLSPolicySource(namespace, name string) string {
	return "/apis/gateway.networking.k8s.io/v1/namespaces/" + namespace + "/backend-tls-policy/" + name
}
