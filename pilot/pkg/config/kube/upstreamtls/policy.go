// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package upstreamtls

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// CACertificateKey is the ConfigMap key that holds a BackendTLSPolicy's CA
// bundle (BackendTLSPolicyValidation.caCertificateRefs, Core support).
const CACertificateKey = "ca.crt"

// Target is one targetRef of a BackendTLSPolicy: a Service of the
// policy's namespace, and the port name when sectionName is set.
type Target struct {
	Service types.NamespacedName
	Section string
}

// Policy is one BackendTLSPolicy (gateway.networking.k8s.io/v1) resolved.
type Policy struct {
	Namespace, Name string
	Generation      int64
	// Created is metadata.creationTimestamp: of several policies for one
	// port, the oldest wins.
	Created time.Time
	// Targets are spec.targetRefs[] of group "" and kind Service, without
	// repeats.
	Targets []Target
	// TLS is the client TLS the policy asks for (Host and Source are set
	// per Service by Resolve); nil when the policy is invalid.
	TLS *model.EPPTLS
	// Invalid is why the policy cannot be applied, "" when it can; it is
	// the message of its Accepted=False condition, with InvalidReason:
	// NoValidCACertificate when no CA reference resolves, Invalid for
	// anything else.
	Invalid       string
	InvalidReason gwv1.PolicyConditionReason
	// RefsReason and RefsMessage are its ResolvedRefs=False condition when
	// a caCertificateRef does not resolve (InvalidKind, a kind other than
	// ConfigMap; InvalidCACertificateRef, a missing ConfigMap, no ca.crt,
	// or a bundle that is not certificates). With some references
	// resolving, the policy stays valid and trusts only their CAs, as the
	// Gateway API asks (Accepted=False only when all are invalid).
	RefsReason  gwv1.PolicyConditionReason
	RefsMessage string
}

// ResourceName is the krt key: namespace/name.
func (p Policy) ResourceName() string { return p.Namespace + "/" + p.Name }

// Key is the policy's namespace/name.
func (p Policy) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

// TargetServices are the Services (namespace/name) the policy targets,
// each once: its index keys.
func (p Policy) TargetServices() []string {
	var out []string
	for _, t := range p.Targets {
		if k := t.Service.String(); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Problem is what a port the policy wins gets instead of TLS: "" when the
// policy is valid, else the policy named with why it is invalid.
func (p Policy) Problem() string {
	if p.TLS != nil {
		return ""
	}
	return fmt.Sprintf("BackendTLSPolicy %s is not accepted: %s", p.ResourceName(), p.Invalid)
}

// ResolvePolicy resolves p, reading the ConfigMaps its caCertificateRefs
// name through configMap (by name in p's namespace; nil when absent).
// From spec.validation:
//
//   - hostname is the SNI, and the only SAN accepted when subjectAltNames
//     is empty.
//   - subjectAltNames of type Hostname are the DNS SANs accepted, those of
//     type URI the URI SANs; a certificate with any one of them passes.
//   - caCertificateRefs: each must be a core ConfigMap (group "", kind
//     ConfigMap) holding under key ca.crt a bundle core.ParseCABundle accepts;
//     the bundles that do are concatenated in order. With none, the policy
//     is invalid (NoValidCACertificate); with some, RefsReason says which
//     did not.
//   - wellKnownCACertificates System: CACertificates is left empty and
//     InsecureSkipVerify false, meaning "verify against the proxy's system
//     trust store". Any other value is unsupported: the policy is invalid.
//
// spec.options are not read.
func ResolvePolicy(p *gwv1.BackendTLSPolicy, configMap func(name string) *corev1.ConfigMap) Policy {
	out := Policy{Namespace: p.Namespace, Name: p.Name, Generation: p.Generation, Created: p.CreationTimestamp.Time,
		Targets: policyTargets(p)}
	tls, err := policyTLS(p, configMap, &out)
	switch {
	case err != nil && out.RefsReason != "":
		out.Invalid, out.InvalidReason = err.Error(), gwv1.BackendTLSPolicyReasonNoValidCACertificate
	case err != nil:
		out.Invalid, out.InvalidReason = err.Error(), gwv1.PolicyReasonInvalid
	default:
		out.TLS = tls
	}
	return out
}

func policyTargets(p *gwv1.BackendTLSPolicy) []Target {
	var out []Target
	for _, r := range p.Spec.TargetRefs {
		if r.Group != "" || r.Kind != "Service" {
			continue
		}
		t := Target{Service: types.NamespacedName{Namespace: p.Namespace, Name: string(r.Name)}, Section: string(ptr.Deref(r.SectionName, ""))}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// policyTLS is the TLS p asks for; it records in res the references that
// do not resolve.
func policyTLS(p *gwv1.BackendTLSPolicy, configMap func(name string) *corev1.ConfigMap, res *Policy) (*model.EPPTLS, error) {
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
		ca, err := caBundle(v.CACertificateRefs, configMap, res)
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

// caBundle concatenates the bundles of the references that resolve; the
// others are recorded in res (the first one's reason, every message). It
// fails when none resolves.
func caBundle(refs []gwv1.LocalObjectReference, configMap func(name string) *corev1.ConfigMap, res *Policy) ([]byte, error) {
	var out []byte
	var bad []string
	fail := func(reason gwv1.PolicyConditionReason, format string, args ...any) {
		if res.RefsReason == "" {
			res.RefsReason = reason
		}
		bad = append(bad, fmt.Sprintf(format, args...))
	}
	for i, r := range refs {
		at := fmt.Sprintf("spec.validation.caCertificateRefs[%d]", i)
		if r.Group != "" || r.Kind != "ConfigMap" {
			fail(gwv1.BackendTLSPolicyReasonInvalidKind, "%s: kind %q in group %q is not supported (only ConfigMap)", at, r.Kind, r.Group)
			continue
		}
		cm := configMap(string(r.Name))
		if cm == nil {
			fail(gwv1.BackendTLSPolicyReasonInvalidCACertificateRef, "%s: ConfigMap %q not found", at, r.Name)
			continue
		}
		data, ok := cm.Data[CACertificateKey]
		if !ok || data == "" {
			fail(gwv1.BackendTLSPolicyReasonInvalidCACertificateRef, "%s: ConfigMap %q has no key %s", at, r.Name, CACertificateKey)
			continue
		}
		ca, err := core.ParseCABundle([]byte(data))
		if err != nil {
			fail(gwv1.BackendTLSPolicyReasonInvalidCACertificateRef, "%s: ConfigMap %q key %s: %v", at, r.Name, CACertificateKey, err)
			continue
		}
		out = append(out, ca...)
	}
	res.RefsMessage = strings.Join(bad, "; ")
	if len(out) == 0 {
		return nil, errors.New(res.RefsMessage)
	}
	return out, nil
}
