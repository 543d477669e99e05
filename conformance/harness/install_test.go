// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/infermesh/infermesh/pkg/test/kubeapply"
)

const (
	installNamespace = "infermesh-system"
	adsSecret        = "pilot-discovery-ads-tls"
	// adsName is the name Gateway proxies dial (PILOT_GATEWAY_XDS_ADDRESS).
	adsName = "pilot-discovery.infermesh-system.svc"
)

// installInfermesh installs infermesh as manifests/README.md tells a user:
// the ADS certificate Secret (with ca.crt), `kubectl apply -f manifests/`,
// then PILOT_GATEWAY_XDS_CA_FILE on the Deployment so Gateway proxies trust
// that CA (the README's step for a private CA, which `kubectl set env`
// does; here a server-side apply of that one env var).
func (c *cluster) installInfermesh(ctx context.Context, repo string) error {
	a, err := kubeapply.New(c.config, fieldManager)
	if err != nil {
		return err
	}
	if _, err := a.ApplyDir(ctx, filepath.Join(repo, "manifests")); err != nil {
		return err
	}
	certPEM, keyPEM, err := adsCertificate()
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: adsSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": certPEM},
	}
	if _, err := c.client.CoreV1().Secrets(installNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("Secret %s: %w", adsSecret, err)
	}
	patch := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"pilot-discovery","namespace":"infermesh-system"},` +
		`"spec":{"template":{"spec":{"containers":[{"name":"discovery","env":[{"name":"PILOT_GATEWAY_XDS_CA_FILE","value":"/etc/infermesh/ads-tls/ca.crt"}]}]}}}}`
	_, err = c.client.AppsV1().Deployments(installNamespace).Patch(ctx, "pilot-discovery", types.ApplyPatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: "kubectl-set-env"})
	return err
}

// eppServices are the endpoint pickers' Services of the suite's base.yaml
// (v1.6.0). Each runs lwepp, which serves ext_proc over TLS with a
// certificate it makes itself (--secure-serving defaults to true;
// conformance.md, trap 6).
var eppServices = []string{
	"primary-endpoint-picker-svc",
	"secondary-endpoint-picker-svc",
	"appprotocol-http-endpoint-picker-svc",
	"appprotocol-h2c-endpoint-picker-svc",
	"dp-endpoint-picker-svc",
}

// eppNamespace is where base.yaml puts the endpoint pickers.
const eppNamespace = "inference-conformance-app-backend"

// eppTLSRules gives each endpoint picker's Service client TLS without
// certificate verification: a DestinationRule with mode SIMPLE and
// insecureSkipVerify, the step Istio's own GIE conformance setup takes
// (setup-tls in the GIE repository's conformance/scripts/istio/Makefile).
// Without it the data plane speaks plaintext gRPC to a TLS server, every
// ext_proc call fails, and FailOpen pools fall back to their own balancing.
// The rules live in the control plane's namespace (Istio's root-namespace
// habit) and name each host by its FQDN, so they exist before the suite
// creates its namespaces.
func (c *cluster) eppTLSRules(ctx context.Context) error {
	a, err := kubeapply.New(c.config, fieldManager)
	if err != nil {
		return err
	}
	for _, svc := range eppServices {
		dr := fmt.Sprintf(`{"apiVersion":"networking.istio.io/v1","kind":"DestinationRule",`+
			`"metadata":{"name":%q,"namespace":%q},`+
			`"spec":{"host":"%s.%s.svc.cluster.local","trafficPolicy":{"tls":{"mode":"SIMPLE","insecureSkipVerify":true}}}}`,
			svc+"-tls", installNamespace, svc, eppNamespace)
		if _, err := a.Apply(ctx, []byte(dr)); err != nil {
			return fmt.Errorf("DestinationRule for %s: %w", svc, err)
		}
	}
	return nil
}

// rolledOut reports whether the Deployment finished rolling out, by the
// test `kubectl rollout status` makes: the controller saw the latest
// generation, every replica runs the latest template and is available,
// and no replica of an older template is left. Setting
// PILOT_GATEWAY_XDS_CA_FILE rolls the Deployment; until the rollout ends
// a replica of the first template (no CA file) may still lead and deploy
// Gateways whose proxies cannot verify the ADS certificate.
func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation &&
		s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
}

// adsCertificate is a self-signed certificate (its own CA) for adsName.
func adsCertificate() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: adsName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:        true, BasicConstraintsValid: true,
		DNSNames: []string{adsName, adsName + ".cluster.local", "pilot-discovery.infermesh-system"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// podsReport describes the pods of namespace with their last events, for
// a failure message.
func (c *cluster) podsReport(ctx context.Context, namespace string) string {
	var b strings.Builder
	pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\npod %s node=%q phase=%s ip=%s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP)
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " [%s ready=%v restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
			}
			b.WriteString("]")
		}
	}
	events, err := c.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				fmt.Fprintf(&b, "\nWarning %s %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
			}
		}
	}
	return b.String()
}
