// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
)

// frontendCAKey is the ConfigMap key of a frontend CA bundle (Gateway API
// FrontendTLSValidation.caCertificateRefs, Core support: "a Kubernetes
// ConfigMap, with the CA certificate in a key named ca.crt").
const frontendCAKey = "ca.crt"

// frontendValidationFor is the client-certificate validation the Gateway's
// spec.tls.frontend asks of an HTTPS listener on port: the perPort entry for
// that port when there is one (it replaces the default entirely), else the
// default. nil when the Gateway asks none.
func frontendValidationFor(gw *gwv1.Gateway, port gwv1.PortNumber) *gwv1.FrontendTLSValidation {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return nil
	}
	f := gw.Spec.TLS.Frontend
	for _, pp := range f.PerPort {
		if pp.Port == port {
			return pp.TLS.Validation
		}
	}
	return f.Default.Validation
}

// InsecureFrontendValidation reports whether the Gateway's spec.tls.frontend
// uses the AllowInsecureFallback mode anywhere (default or a perPort entry):
// the Gateway then carries InsecureFrontendValidationMode=True.
func InsecureFrontendValidation(gw *gwv1.Gateway) bool {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return false
	}
	f := gw.Spec.TLS.Frontend
	insecure := func(v *gwv1.FrontendTLSValidation) bool {
		return v != nil && v.Mode == gwv1.AllowInsecureFallback
	}
	if insecure(f.Default.Validation) {
		return true
	}
	for _, pp := range f.PerPort {
		if insecure(pp.TLS.Validation) {
			return true
		}
	}
	return false
}

// resolveFrontendValidation resolves the caCertificateRefs of v for an HTTPS
// listener of a Gateway in gwNamespace (Gateway API FrontendTLSValidation):
//
//   - a reference must be a core ConfigMap (group "", kind ConfigMap),
//     else InvalidCACertificateKind;
//   - a ConfigMap in another namespace needs a ReferenceGrant there from
//     Gateways of gwNamespace, else RefNotPermitted (checked before the
//     ConfigMap is looked at);
//   - the ConfigMap must exist and hold PEM certificates under ca.crt that
//     Envoy can load as trusted CAs, else InvalidCACertificateRef.
//
// The bundles of the references that resolve are concatenated in order. The
// problem returned is the first reference's that does not resolve (the
// listener's ResolvedRefs=False reason and message); when none resolves, the
// returned validation is nil and the listener is not accepted
// (NoValidCACertificate).
func resolveFrontendValidation(gwNamespace string, v *gwv1.FrontendTLSValidation, lk CertificateLookups) (*model.ClientValidation, *certificateProblem) {
	var (
		bundle  []byte
		first   *certificateProblem
		resolve = 0
	)
	for i, ref := range v.CACertificateRefs {
		at := fmt.Sprintf("spec.tls.frontend caCertificateRefs[%d]", i)
		problem := func(reason gwv1.ListenerConditionReason, format string, args ...any) {
			if first == nil {
				first = &certificateProblem{reason: reason, message: at + ": " + fmt.Sprintf(format, args...)}
			}
		}
		ns := string(ptr.Deref(ref.Namespace, gwv1.Namespace(gwNamespace)))
		key := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
		if ref.Group != "" || ref.Kind != "ConfigMap" {
			problem(gwv1.ListenerReasonInvalidCACertificateKind, "kind %q in group %q is not supported: only ConfigMaps (group \"\", kind ConfigMap)", ref.Kind, ref.Group)
			continue
		}
		if !gatewayMayUse(lk, gwNamespace, "ConfigMap", key) {
			problem(gwv1.ListenerReasonRefNotPermitted, "ConfigMap %s is not permitted: no ReferenceGrant in namespace %s allows Gateways of namespace %s to use it", key, ns, gwNamespace)
			continue
		}
		var cm *corev1.ConfigMap
		if lk.ConfigMap != nil {
			cm = lk.ConfigMap(key)
		}
		if cm == nil {
			problem(gwv1.ListenerReasonInvalidCACertificateRef, "ConfigMap %s does not exist", key)
			continue
		}
		data, ok := cm.Data[frontendCAKey]
		if !ok {
			problem(gwv1.ListenerReasonInvalidCACertificateRef, "ConfigMap %s has no key %s", key, frontendCAKey)
			continue
		}
		ca, err := core.ParseCABundle([]byte(data))
		if err != nil {
			problem(gwv1.ListenerReasonInvalidCACertificateRef, "ConfigMap %s key %s: %v", key, frontendCAKey, err)
			continue
		}
		bundle = append(bundle, ca...) // re-encoded: each block ends in a newline
		resolve++
	}
	if resolve == 0 {
		return nil, first
	}
	return &model.ClientValidation{
		CACertificates:        bundle,
		AllowInsecureFallback: v.Mode == gwv1.AllowInsecureFallback,
	}, first
}
