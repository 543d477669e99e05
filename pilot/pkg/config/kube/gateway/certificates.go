// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// CertificateLookups are what an HTTPS listener's tls.certificateRefs and
// its frontend caCertificateRefs are resolved against. A nil function finds nothing (every Secret missing, no
// ReferenceGrant).
type CertificateLookups struct {
	// Secret returns the Secret called key, or nil.
	Secret func(key types.NamespacedName) *corev1.Secret
	// ReferenceGrants returns the ReferenceGrants in namespace ns.
	ReferenceGrants func(ns string) []*gwv1.ReferenceGrant
	// ConfigMap returns the ConfigMap called key, or nil: the CA bundles
	// of the Gateway's spec.tls.frontend (frontendtls.go).
	ConfigMap func(key types.NamespacedName) *corev1.ConfigMap
	// FromKind is the kind whose ReferenceGrants permit a reference to
	// another namespace: "" means Gateway; a ListenerSet's listeners
	// resolve their certificateRefs with ListenerSetKind.
	FromKind string
	// Filters resolve listeners' filters.requests (listenerfilters.go);
	// nil: no ExternalProcessor exists, every ExtensionRef fails to
	// resolve.
	Filters *ListenerFilterLookups
}

// certificateProblem is why one certificateRef does not resolve: the
// listener's ResolvedRefs=False reason (InvalidCertificateRef or
// RefNotPermitted) and message.
type certificateProblem struct {
	reason  gwv1.ListenerConditionReason
	message string
}

// gatewayMayUse reports whether a Gateway of namespace gwNamespace may use
// the core object of kind called key: in its own namespace always, in
// another only with a ReferenceGrant there from Gateways of gwNamespace
// (from ListenerSets of gwNamespace when lk.FromKind is ListenerSetKind).
func gatewayMayUse(lk CertificateLookups, gwNamespace, kind string, key types.NamespacedName) bool {
	if key.Namespace == gwNamespace {
		return true
	}
	var grants []*gwv1.ReferenceGrant
	if lk.ReferenceGrants != nil {
		grants = lk.ReferenceGrants(key.Namespace)
	}
	from := lk.FromKind
	if from == "" {
		from = GatewayKind
	}
	return ReferenceGrantAllows(grants, key.Namespace, GroupKind{Group: GatewayGroup, Kind: from}, gwNamespace,
		GroupKind{Kind: kind}, key.Name)
}

// ResolveCertificateRef resolves one tls.certificateRefs entry of a listener
// of a Gateway in gwNamespace (Gateway API GatewayTLSConfig.certificateRefs):
// it must name a core Secret (group "", kind Secret); a Secret in another
// namespace needs a ReferenceGrant there from Gateways of gwNamespace
// (RefNotPermitted otherwise, checked before the Secret is looked at, so a
// reference that is not permitted reveals nothing of the Secret); the
// Secret must exist, be of type kubernetes.io/tls and hold a PEM
// certificate chain in tls.crt and its private key in tls.key
// (InvalidCertificateRef otherwise). It returns the Secret's key when the
// reference resolves.
func ResolveCertificateRef(gwNamespace string, ref gwv1.SecretObjectReference, lk CertificateLookups) (types.NamespacedName, *certificateProblem) {
	group, kind := string(ptr.Deref(ref.Group, "")), string(ptr.Deref(ref.Kind, "Secret"))
	ns := string(ptr.Deref(ref.Namespace, gwv1.Namespace(gwNamespace)))
	key := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
	invalid := func(format string, args ...any) (types.NamespacedName, *certificateProblem) {
		return key, &certificateProblem{reason: gwv1.ListenerReasonInvalidCertificateRef, message: fmt.Sprintf(format, args...)}
	}
	if group != "" || kind != "Secret" {
		return invalid("certificateRef %s/%s %s: only core Secrets (group \"\", kind Secret) are supported", group, kind, key)
	}
	if !gatewayMayUse(lk, gwNamespace, "Secret", key) {
		return key, &certificateProblem{reason: gwv1.ListenerReasonRefNotPermitted,
			message: fmt.Sprintf("certificateRef to Secret %s is not permitted: no ReferenceGrant in namespace %s allows %ss of namespace %s to use it", key, ns, fromKindName(lk), gwNamespace)}
	}
	var s *corev1.Secret
	if lk.Secret != nil {
		s = lk.Secret(key)
	}
	if s == nil {
		return invalid("Secret %s does not exist", key)
	}
	if err := core.CheckTLSSecret(s); err != nil {
		return invalid("Secret %s: %v", key, err)
	}
	return key, nil
}

func fromKindName(lk CertificateLookups) string {
	if lk.FromKind == "" {
		return GatewayKind
	}
	return lk.FromKind
}
