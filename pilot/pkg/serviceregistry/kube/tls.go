// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"cmp"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// CACertificateKey is the ConfigMap key that holds a BackendTLSPolicy's CA
// bundle (BackendTLSPolicyValidation.caCertificateRefs, Core support).
const CACertificateKey = "ca.crt"

// BackendTLS is one BackendTLSPolicy (gateway.networking.k8s.io/v1) resolved:
// its Service targets and the TLS it asks for, or why it is invalid.
type BackendTLS struct {
	// Namespace and Name are the policy's.
	Namespace, Name string
	// Created is metadata.creationTimestamp: the older policy wins when
	// several target one Service.
	Created time.Time
	// Targets are spec.targetRefs[] of group "" and kind Service, as
	// "<namespace>/<name>" (targets are in the policy's namespace).
	Targets []string
	// TLS is the client TLS the policy asks for, Host left empty; nil when
	// the policy is invalid.
	TLS *model.EPPTLS
	// Invalid says why the policy cannot be applied; "" when valid.
	Invalid string
}

// ResourceName is the krt key: namespace/name.
func (b BackendTLS) ResourceName() string { return b.Namespace + "/" + b.Name }

// BackendTLSBuilder is the transformation of a BackendTLSPolicy into its
// BackendTLS, reading the ConfigMaps it names from configMaps. An invalid
// policy is logged, with its key, each time it is computed (it changes or a
// ConfigMap it names does), and kept with Invalid set.
func BackendTLSBuilder(configMaps krt.Collection[*corev1.ConfigMap]) krt.TransformationSingle[*gwv1.BackendTLSPolicy, BackendTLS] {
	return func(ctx krt.HandlerContext, p *gwv1.BackendTLSPolicy) *BackendTLS {
		b := &BackendTLS{Namespace: p.Namespace, Name: p.Name, Created: p.CreationTimestamp.Time, Targets: policyTargets(p)}
		tls, err := ResolveBackendTLSPolicy(p, func(name string) *corev1.ConfigMap {
			if cm := krt.FetchOne(ctx, configMaps, krt.FilterKey(p.Namespace+"/"+name)); cm != nil {
				return *cm
			}
			return nil
		})
		if err != nil {
			b.Invalid = err.Error()
			slog.Warn("serviceregistry: BackendTLSPolicy left out", "key", b.ResourceName(), "error", err)
			return b
		}
		b.TLS = tls
		return b
	}
}

func policyTargets(p *gwv1.BackendTLSPolicy) []string {
	var out []string
	for _, r := range p.Spec.TargetRefs {
		if r.Group == "" && r.Kind == "Service" {
			k := p.Namespace + "/" + string(r.Name)
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// ResolveBackendTLSPolicy returns the client TLS a BackendTLSPolicy asks for
// (Host left empty); configMap looks a ConfigMap up by name in the policy's
// namespace (nil when absent). From spec.validation:
//
//   - hostname is the SNI, and the only SAN accepted when subjectAltNames
//     is empty.
//   - subjectAltNames of type Hostname are the DNS SANs accepted, those of
//     type URI the URI SANs; a certificate with any one of them passes.
//   - caCertificateRefs: each must be a core ConfigMap (group "", kind
//     ConfigMap) holding a PEM CERTIFICATE under key ca.crt; the bundles are
//     concatenated in order. Another kind, or a missing ConfigMap, key or
//     certificate, makes the policy invalid with a *CARefError.
//   - wellKnownCACertificates System: CACertificates is left empty and
//     InsecureSkipVerify false, meaning "verify against the proxy's system
//     trust store"; the translator must not read an empty CA as "skip
//     verification". Any other value is unsupported, so the policy is
//     invalid.
//
// spec.targetRefs[].sectionName (a Service port) is not distinguished: TLS is
// per host in the model (an Endpoint Picker serves gRPC on one port).
// spec.options are not read.
func ResolveBackendTLSPolicy(p *gwv1.BackendTLSPolicy, configMap func(name string) *corev1.ConfigMap) (*model.EPPTLS, error) {
	v := p.Spec.Validation
	if v.Hostname == "" {
		return nil, errors.New("spec.validation.hostname is required")
	}
	t := &model.EPPTLS{SNI: string(v.Hostname)}
	for i, san := range v.SubjectAltNames {
		switch san.Type {
		case gwv1.HostnameSubjectAltNameType:
			t.SubjectAltNames = append(t.SubjectAltNames, string(san.Hostname))
		case gwv1.URISubjectAltNameType:
			t.URISubjectAltNames = append(t.URISubjectAltNames, string(san.URI))
		default:
			return nil, fmt.Errorf("spec.validation.subjectAltNames[%d]: type %q is not supported (only Hostname and URI)", i, san.Type)
		}
	}
	if len(t.SubjectAltNames) == 0 && len(t.URISubjectAltNames) == 0 {
		t.SubjectAltNames = []string{string(v.Hostname)}
	}
	wellKnown := v.WellKnownCACertificates != nil && *v.WellKnownCACertificates != ""
	switch {
	case len(v.CACertificateRefs) > 0 && wellKnown:
		return nil, errors.New("spec.validation: caCertificateRefs and wellKnownCACertificates are exclusive")
	case len(v.CACertificateRefs) > 0:
		ca, err := caBundle(v.CACertificateRefs, configMap)
		if err != nil {
			return nil, err
		}
		t.CACertificates = ca
	case wellKnown:
		if *v.WellKnownCACertificates != gwv1.WellKnownCACertificatesSystem {
			return nil, fmt.Errorf("spec.validation.wellKnownCACertificates: %q is not supported (only System)", *v.WellKnownCACertificates)
		}
	default:
		return nil, errors.New("spec.validation: one of caCertificateRefs and wellKnownCACertificates is required")
	}
	return t, nil
}

// CARefError is a BackendTLSPolicy whose caCertificateRefs do not
// resolve: Reason is the policy's ResolvedRefs=False reason, InvalidKind
// (not a ConfigMap) or InvalidCACertificateRef (missing, or no
// certificate under ca.crt); the policy is then Accepted=False with
// NoValidCACertificate (Gateway API BackendTLSPolicyValidation).
type CARefError struct {
	Reason gwv1.PolicyConditionReason
	Msg    string
}

func (e *CARefError) Error() string { return e.Msg }

func caBundle(refs []gwv1.LocalObjectReference, configMap func(name string) *corev1.ConfigMap) ([]byte, error) {
	var out []byte
	for i, r := range refs {
		at := fmt.Sprintf("spec.validation.caCertificateRefs[%d]", i)
		if r.Group != "" || r.Kind != "ConfigMap" {
			return nil, &CARefError{Reason: gwv1.BackendTLSPolicyReasonInvalidKind,
				Msg: fmt.Sprintf("%s: kind %q in group %q is not supported (only ConfigMap)", at, r.Kind, r.Group)}
		}
		cm := configMap(string(r.Name))
		if cm == nil {
			return nil, &CARefError{Reason: gwv1.BackendTLSPolicyReasonInvalidCACertificateRef,
				Msg: fmt.Sprintf("%s: ConfigMap %q not found", at, r.Name)}
		}
		data := cm.Data[CACertificateKey]
		if !hasCertificate([]byte(data)) {
			return nil, &CARefError{Reason: gwv1.BackendTLSPolicyReasonInvalidCACertificateRef,
				Msg: fmt.Sprintf("%s: ConfigMap %q has no PEM certificate under key %s", at, r.Name, CACertificateKey)}
		}
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, data...)
	}
	return out, nil
}

func hasCertificate(data []byte) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if b.Type == "CERTIFICATE" {
			return true
		}
	}
}

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
		return ServiceHost(h, dr.Namespace, clusterDomain)
	}
	return h
}

// DestinationRuleTLS is the client TLS of a DestinationRule
// (spec.trafficPolicy.tls), Host left empty; nil for DISABLE (or no mode).
// sni, subjectAltNames and insecureSkipVerify are carried as is: the
// translator verifies the EPP's name against subjectAltNames, or, when the
// rule names none, against the SNI it sends (see model.EPPTLS). A
// subjectAltNames entry is matched as a DNS name only; one that is not a
// DNS name (a spiffe:// URI) is logged, as no certificate will match it
// (Istio would also match it as a URI SAN). caCertificates is
// a file path on the proxy, which the control plane cannot inline, and
// credentialName (a Secret) is not read: without insecureSkipVerify the
// result has no CA, meaning "verify against the proxy's system trust store"
// (what Istio does for SIMPLE without a CA).
//
// MUTUAL and ISTIO_MUTUAL ask for a client certificate, which pilot-discovery
// cannot deliver (no SDS, no mesh identity). They give TLS as SIMPLE would,
// without a client certificate, and a warning naming the rule: the user
// asked for encryption, so falling back to plaintext would be a silent
// downgrade, while an EPP that requires a client certificate refuses the
// handshake visibly (FailOpen then falls back, FailClose fails).
func DestinationRuleTLS(dr kubelib.DestinationRule) *model.EPPTLS {
	if dr.TLS == nil {
		return nil
	}
	switch dr.TLS.Mode {
	case kubelib.TLSModeSimple:
	case kubelib.TLSModeMutual, kubelib.TLSModeIstioMutual:
		slog.Warn("serviceregistry: DestinationRule asks for mutual TLS; client certificates are not supported, so the EPP is reached with TLS and no client certificate",
			"destinationRule", dr.ResourceName(), "mode", dr.TLS.Mode)
	default:
		return nil
	}
	for _, san := range dr.TLS.SubjectAltNames {
		if strings.Contains(san, ":") || strings.Contains(san, "/") {
			slog.Warn("serviceregistry: DestinationRule subjectAltNames entry is not a DNS name; it is matched as a DNS name only, so no certificate will match it",
				"destinationRule", dr.ResourceName(), "subjectAltName", san)
		}
	}
	return &model.EPPTLS{SNI: dr.TLS.SNI, InsecureSkipVerify: dr.TLS.InsecureSkipVerify, SubjectAltNames: slices.Clone(dr.TLS.SubjectAltNames)}
}

// EPPTLSBuilder is the EPPTLS transformation over Services. rules indexes
// DestinationRules by DestinationRuleHost and policies indexes BackendTLS by
// target Service key; either may be nil (that source is off). For a Service:
//
//   - If any BackendTLSPolicy targets it, the Gateway API's precedence
//     picks one (oldest metadata.creationTimestamp, then namespace/name) and
//     it alone decides: its TLS, or none when it is invalid. A
//     DestinationRule is then ignored: BackendTLSPolicy is the Gateway API
//     standard and wins over the Istio-specific rule, and an invalid policy
//     must not fall back to a weaker DestinationRule (for example one with
//     insecureSkipVerify).
//   - Otherwise the DestinationRules for its host: one in the Service's
//     namespace first, then by namespace/name (Istio's merging and exportTo
//     are not modelled); DestinationRuleTLS of that one.
func EPPTLSBuilder(rules krt.Index[string, kubelib.DestinationRule], policies krt.Index[string, BackendTLS], clusterDomain string) krt.TransformationSingle[*corev1.Service, model.EPPTLS] {
	return func(ctx krt.HandlerContext, svc *corev1.Service) *model.EPPTLS {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			return nil
		}
		host := ServiceHost(svc.Name, svc.Namespace, clusterDomain)
		var t *model.EPPTLS
		var source string
		if ps := fetchIndex(ctx, policies, svc.Namespace+"/"+svc.Name); len(ps) > 0 {
			p := winningPolicy(ps)
			t, source = p.TLS, BackendTLSPolicySource(p.Namespace, p.Name)
		} else if drs := fetchIndex(ctx, rules, host); len(drs) > 0 {
			dr := winningRule(drs, svc.Namespace)
			t, source = DestinationRuleTLS(dr), DestinationRuleSource(dr.Namespace, dr.Name)
		}
		if t == nil {
			return nil
		}
		out := *t
		out.Host, out.Source = host, source
		return &out
	}
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

func fetchIndex[O any](ctx krt.HandlerContext, idx krt.Index[string, O], k string) []O {
	if idx == nil {
		return nil
	}
	return idx.Fetch(ctx, k)
}

// winningPolicy: oldest creationTimestamp, then namespace/name.
func winningPolicy(ps []BackendTLS) BackendTLS {
	return slices.MinFunc(ps, func(a, b BackendTLS) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.ResourceName(), b.ResourceName())
	})
}

// winningRule: a rule in namespace ns, else the first by namespace/name.
func winningRule(drs []kubelib.DestinationRule, ns string) kubelib.DestinationRule {
	for _, dr := range drs {
		if dr.Namespace == ns {
			return dr
		}
	}
	return slices.MinFunc(drs, func(a, b kubelib.DestinationRule) int {
		return cmp.Compare(a.ResourceName(), b.ResourceName())
	})
}
