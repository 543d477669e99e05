// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/infermesh/infermesh/pkg/test/certs"
)

// Identities in the static token file. The admin and the controller-manager are
// in system:masters; the controller-manager has its own name so the audit log
// tells its writes apart. The scheduler is in no group: it acts through the
// apiserver's bootstrap RBAC for system:kube-scheduler, as in a real cluster.
const (
	// AdminUser is the user name of Env.RESTConfig and Env.Kubeconfig.
	AdminUser = "kubeenv-admin"
	// ControllerManagerUser is the user name kube-controller-manager acts as.
	ControllerManagerUser = "system:kube-controller-manager"
	// SchedulerUser is the user name kube-scheduler acts as (WithScheduler).
	SchedulerUser = "system:kube-scheduler"
)

// auditPolicy logs every request once, when its response completes (and when a
// long-running one such as a watch starts), at Metadata level: who, verb,
// object, URI and response code, but no bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// files are the paths of what the control plane reads, all under one folder.
type files struct {
	dir            string
	servingCert    string // self-signed, also the clients' CA
	servingKey     string
	kubeletCert    string // the apiserver's client certificate to kubelets (self-signed)
	kubeletKey     string
	serviceAccount string // ECDSA key: verifies and signs service-account tokens
	tokens         string
	auditPolicy    string
	auditLog       string
	adminConfig    string // kubeconfig for tests
	kcmConfig      string // kubeconfig for kube-controller-manager
	schedConfig    string // kubeconfig for kube-scheduler
	etcdData       string
	logs           string
}

func newFiles(dir string) files {
	p := func(name string) string { return filepath.Join(dir, name) }
	return files{
		dir:            dir,
		servingCert:    p("pki/apiserver.crt"),
		servingKey:     p("pki/apiserver.key"),
		kubeletCert:    p("pki/apiserver-kubelet-client.crt"),
		kubeletKey:     p("pki/apiserver-kubelet-client.key"),
		serviceAccount: p("pki/sa.key"),
		tokens:         p("pki/tokens.csv"),
		auditPolicy:    p("audit-policy.yaml"),
		auditLog:       p("audit.log"),
		adminConfig:    p("kubeconfig"),
		kcmConfig:      p("kube-controller-manager.kubeconfig"),
		schedConfig:    p("kube-scheduler.kubeconfig"),
		etcdData:       p("etcd"),
		logs:           p("logs"),
	}
}

// credentials are what clients need to reach the apiserver.
type credentials struct {
	host       string // https://127.0.0.1:port
	caPEM      []byte
	adminToken string
	// kubeletClientPEM is the apiserver's client certificate to kubelets,
	// its own CA: what a node agent trusts for its kubelet API.
	kubeletClientPEM []byte
	kcmToken         string
	schedToken       string
}

// write creates every file the control plane reads, with fresh keys and tokens.
func (f files) write(host string) (credentials, error) {
	for _, d := range []string{filepath.Dir(f.servingCert), f.etcdData, f.logs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return credentials{}, fmt.Errorf("kubeenv: %w", err)
		}
	}
	certPEM, keyPEM, err := selfSignedServingCert()
	if err != nil {
		return credentials{}, err
	}
	saPEM, err := ecdsaKeyPEM()
	if err != nil {
		return credentials{}, err
	}
	// kubeadm's apiserver-kubelet-client: group system:masters.
	kubeletPEM, kubeletKeyPEM, err := certs.SelfSignedClient("kube-apiserver-kubelet-client", []string{"system:masters"})
	if err != nil {
		return credentials{}, fmt.Errorf("kubeenv: kubelet client certificate: %w", err)
	}
	c := credentials{host: host, caPEM: certPEM, adminToken: randomToken(), kcmToken: randomToken(), schedToken: randomToken(), kubeletClientPEM: kubeletPEM}
	tokens := fmt.Sprintf("%s,%s,1,\"system:masters\"\n%s,%s,2,\"system:masters\"\n%s,%s,3\n",
		c.adminToken, AdminUser, c.kcmToken, ControllerManagerUser, c.schedToken, SchedulerUser)
	for path, data := range map[string][]byte{
		f.servingCert:    certPEM,
		f.servingKey:     keyPEM,
		f.kubeletCert:    kubeletPEM,
		f.kubeletKey:     kubeletKeyPEM,
		f.serviceAccount: saPEM,
		f.tokens:         []byte(tokens),
		f.auditPolicy:    []byte(auditPolicy),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return credentials{}, fmt.Errorf("kubeenv: %w", err)
		}
	}
	if err := writeKubeconfig(f.adminConfig, c, AdminUser, c.adminToken); err != nil {
		return credentials{}, err
	}
	if err := writeKubeconfig(f.kcmConfig, c, ControllerManagerUser, c.kcmToken); err != nil {
		return credentials{}, err
	}
	if err := writeKubeconfig(f.schedConfig, c, SchedulerUser, c.schedToken); err != nil {
		return credentials{}, err
	}
	return c, nil
}

func writeKubeconfig(path string, c credentials, user, token string) error {
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"kubeenv": {Server: c.host, CertificateAuthorityData: c.caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"kubeenv": {Cluster: "kubeenv", AuthInfo: user}},
		CurrentContext: "kubeenv",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return fmt.Errorf("kubeenv: write kubeconfig: %w", err)
	}
	return nil
}

// selfSignedServingCert returns a PEM certificate and key valid for one day
// for 127.0.0.1 and localhost, and, as a real apiserver's, for the kubernetes
// Service's ClusterIP and names (in-cluster clients dial
// KUBERNETES_SERVICE_HOST). The certificate is its own CA, so clients trust
// it directly; restarts of the apiserver reuse it.
func selfSignedServingCert() (certPEM, keyPEM []byte, err error) {
	certPEM, keyPEM, err = certs.SelfSignedFor("kubeenv-apiserver",
		[]net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(KubernetesServiceIP)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return nil, nil, fmt.Errorf("kubeenv: serving certificate: %w", err)
	}
	return certPEM, keyPEM, nil
}

// ecdsaKeyPEM returns a fresh P-256 private key in PEM.
func ecdsaKeyPEM() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("kubeenv: service-account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("kubeenv: service-account key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// randomToken returns 128 random bits in hex.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
