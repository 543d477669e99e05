// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// DestinationRuleGVR is the Istio DestinationRule resource we read.
var DestinationRuleGVR = destinationRuleCRD.gvr()

// DestinationRule is the part of an Istio DestinationRule
// (networking.istio.io/v1) that the control plane uses: the host it applies
// to and its client TLS settings (spec.trafficPolicy.tls), which is how the
// seed enables TLS from the gateway to an endpoint picker. Subsets and
// per-port settings (spec.trafficPolicy.portLevelSettings) are not read.
type DestinationRule struct {
	Name      string
	Namespace string
	// Created is metadata.creationTimestamp: of several rules for one
	// host, the oldest wins (pilot/pkg/config/kube/upstreamtls).
	Created time.Time
	// Host is spec.host as written: a short Service name (relative to
	// Namespace), a fully qualified name, or a wildcard.
	Host string
	// TLS is spec.trafficPolicy.tls; nil when absent.
	TLS *ClientTLS
}

// ClientTLS is a DestinationRule's client TLS settings.
type ClientTLS struct {
	// Mode is DISABLE (also when unset), SIMPLE, MUTUAL or ISTIO_MUTUAL.
	Mode string
	// InsecureSkipVerify skips verifying the server's certificate and name.
	InsecureSkipVerify bool
	// CACertificates is a file path to the CA bundle (Istio proxies' view).
	CACertificates string
	// SNI is the server name to send.
	SNI string
	// CredentialName names a Secret with the client certificate and key
	// and the CA bundle; Istio reads it in the namespace of the proxy that
	// uses it (a Gateway's).
	CredentialName string
	// SubjectAltNames are the names the server certificate must carry (one
	// of them); empty means the rule names none.
	SubjectAltNames []string
}

var _ krt.ResourceNamer = DestinationRule{}

// ResourceName is the collection key: "namespace/name".
func (d DestinationRule) ResourceName() string { return d.Namespace + "/" + d.Name }

// GetNamespace lets krt index DestinationRules by namespace.
func (d DestinationRule) GetNamespace() string { return d.Namespace }

// TLS modes of ClientTLS.Mode.
const (
	TLSModeDisable     = "DISABLE"
	TLSModeSimple      = "SIMPLE"
	TLSModeMutual      = "MUTUAL"
	TLSModeIstioMutual = "ISTIO_MUTUAL"
)

var tlsModes = []string{TLSModeDisable, TLSModeSimple, TLSModeMutual, TLSModeIstioMutual}

// DestinationRuleFromUnstructured reads a DestinationRule from its
// unstructured form. It fails, naming the field, when a field we read has the
// wrong type, when spec.host is missing, or when the TLS mode is unknown;
// fields we do not read are never checked.
func DestinationRuleFromUnstructured(u *unstructured.Unstructured) (DestinationRule, error) {
	dr := DestinationRule{Name: u.GetName(), Namespace: u.GetNamespace(), Created: u.GetCreationTimestamp().Time}
	if dr.Name == "" || dr.Namespace == "" {
		return dr, fmt.Errorf("metadata.name and metadata.namespace are required")
	}
	spec, err := object(u.Object, "", "spec")
	if err != nil {
		return dr, err
	}
	if dr.Host, err = str(spec, "spec", "host"); err != nil {
		return dr, err
	}
	if dr.Host == "" {
		return dr, fmt.Errorf("spec.host is required")
	}
	policy, err := object(spec, "spec", "trafficPolicy")
	if err != nil || policy == nil {
		return dr, err
	}
	tls, err := object(policy, "spec.trafficPolicy", "tls")
	if err != nil || tls == nil {
		return dr, err
	}
	const at = "spec.trafficPolicy.tls"
	t := &ClientTLS{}
	if t.Mode, err = str(tls, at, "mode"); err != nil {
		return dr, err
	}
	if t.Mode == "" {
		t.Mode = TLSModeDisable
	}
	if !slices.Contains(tlsModes, t.Mode) {
		return dr, fmt.Errorf("%s.mode: unknown mode %q", at, t.Mode)
	}
	if v, ok := tls["insecureSkipVerify"]; ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			return dr, fmt.Errorf("%s.insecureSkipVerify: want a boolean, got %T", at, v)
		}
		t.InsecureSkipVerify = b
	}
	if t.CACertificates, err = str(tls, at, "caCertificates"); err != nil {
		return dr, err
	}
	if t.SNI, err = str(tls, at, "sni"); err != nil {
		return dr, err
	}
	if t.CredentialName, err = str(tls, at, "credentialName"); err != nil {
		return dr, err
	}
	if t.SubjectAltNames, err = strs(tls, at, "subjectAltNames"); err != nil {
		return dr, err
	}
	dr.TLS = t
	return dr, nil
}

// object returns m[key] as an object: nil when absent or null, an error when
// it is something else. at is m's path, for the message.
func object(m map[string]any, at, key string) (map[string]any, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want an object, got %T", path(at, key), v)
	}
	return o, nil
}

// str returns m[key] as a string: "" when absent or null, an error when it is
// something else. at is m's path, for the message.
func str(m map[string]any, at, key string) (string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: want a string, got %T", path(at, key), v)
	}
	return s, nil
}

// strs returns m[key] as a list of strings: nil when absent or null, an
// error when it or an element is something else. at is m's path.
func strs(m map[string]any, at, key string) ([]string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a list of strings, got %T", path(at, key), v)
	}
	out := make([]string, 0, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: want a string, got %T", path(at, key), i, e)
		}
		out = append(out, s)
	}
	return out, nil
}

func path(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// destinationRuleObject is what the DestinationRule informer stores: the
// converted rule, or the reason it could not be converted, plus the metadata
// client-go's store needs to key it.
type destinationRuleObject struct {
	metav1.ObjectMeta
	rule DestinationRule
	err  error
}

// destinationRuleTransform is the DestinationRule informer's transform:
// unstructured in, *destinationRuleObject out, so the informer's cache holds
// only the fields we read. A malformed object is logged with its key and kept
// as invalid (the collection drops it); keeping it lets a later valid version
// or a delete be handled normally. Idempotent.
func destinationRuleTransform(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	rule, err := DestinationRuleFromUnstructured(u)
	if err != nil {
		slog.Warn("kube: ignoring malformed DestinationRule",
			"key", u.GetNamespace()+"/"+u.GetName(), "error", err)
	}
	return &destinationRuleObject{
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), ResourceVersion: u.GetResourceVersion()},
		rule:       rule,
		err:        err,
	}, nil
}

// destinationRuleConvert is the optional collection's convert function.
func destinationRuleConvert(obj any) (DestinationRule, bool) {
	o, ok := obj.(*destinationRuleObject)
	if !ok {
		slog.Error("kube: DestinationRule informer delivered an unexpected type", "got", fmt.Sprintf("%T", obj))
		return DestinationRule{}, false
	}
	return o.rule, o.err == nil
}

func newDestinationRuleInformer(client dynamic.Interface, resync time.Duration) cache.SharedIndexInformer {
	inf := dynamicinformer.NewFilteredDynamicInformer(client, DestinationRuleGVR, "", resync, cache.Indexers{}, nil).Informer()
	_ = inf.SetTransform(destinationRuleTransform) // cannot fail: the informer is not running
	return inf
}
