// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// tokenLifetime is how long a pod's service-account token is valid: the
// kubelet asks for an hour and refreshes it; this node asks once for a day,
// longer than any test.
const tokenLifetime = 24 * time.Hour

// tokenWait bounds how long a pod waits for its ServiceAccount to exist (the
// serviceaccount controller makes "default" moments after its namespace).
const tokenWait = 60 * time.Second

// credentials writes the pod's kubeconfig into dir and returns its path:
// the API server through the node's forwarder on the bridge, its CA, the
// server name its certificate carries, and a token of the pod's
// ServiceAccount bound to the pod (TokenRequest, as the kubelet's projected
// token), so the pod acts with its own RBAC. A pod that opts out with
// automountServiceAccountToken: false gets a kubeconfig without a token.
func (n *provider) credentials(ctx context.Context, pod *corev1.Pod, dir string) (string, error) {
	token := ""
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		var err error
		if token, err = n.requestToken(ctx, pod); err != nil {
			return "", err
		}
	}
	api, err := url.Parse(n.cfg.RESTConfig.Host)
	if err != nil {
		return "", fmt.Errorf("node: API server address %q: %w", n.cfg.RESTConfig.Host, err)
	}
	caData := n.cfg.RESTConfig.CAData
	if len(caData) == 0 && n.cfg.RESTConfig.CAFile != "" {
		if caData, err = os.ReadFile(n.cfg.RESTConfig.CAFile); err != nil {
			return "", fmt.Errorf("node: API server CA: %w", err)
		}
	}
	cluster := &clientcmdapi.Cluster{
		Server:                   "https://" + n.forwarder.addr(),
		CertificateAuthorityData: caData,
		TLSServerName:            api.Hostname(),
	}
	user := &clientcmdapi.AuthInfo{Token: token}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"cluster": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"pod": user},
		Contexts:       map[string]*clientcmdapi.Context{"pod": {Cluster: "cluster", AuthInfo: "pod", Namespace: pod.Namespace}},
		CurrentContext: "pod",
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return "", fmt.Errorf("node: write kubeconfig: %w", err)
	}
	return path, nil
}

// requestToken asks for a token of the pod's ServiceAccount bound to the
// pod, retrying while the account does not exist yet. A pod without
// serviceAccountName (the ServiceAccount admission plugin, which kubeenv
// turns off, would have set "default") gets an unbound token of "default":
// the apiserver refuses to bind a token to a pod that names no account.
func (n *provider) requestToken(ctx context.Context, pod *corev1.Pod) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	return n.tokenFor(ctx, pod, req)
}

// tokenFor runs req for the pod's ServiceAccount, retrying while the account
// does not exist yet; a pod without serviceAccountName gets an unbound token
// of "default" (see requestToken).
func (n *provider) tokenFor(ctx context.Context, pod *corev1.Pod, req *authenticationv1.TokenRequest) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa, req.Spec.BoundObjectRef = "default", nil
	}
	var token string
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, tokenWait, true, func(ctx context.Context) (bool, error) {
		out, err := n.cfg.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		token = out.Status.Token
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("token for serviceaccount %s/%s: %w (last error: %v)", pod.Namespace, sa, err, last)
	}
	return token, nil
}
