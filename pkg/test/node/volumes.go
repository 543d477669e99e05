// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Volumes: the kubelet's volume plugins write each volume into a folder of
// the pod (/var/lib/kubelet/pods/<uid>/volumes/...) and the runtime
// bind-mounts it at each container's mountPath. This node does the same:
// writeVolumes fills <pod folder>/volumes/<name> once, when the pod
// starts, and each container process gets its own mount namespace with
// those folders bind-mounted (mounts.go). Supported kinds:
// configMap, secret, projected (serviceAccountToken, configMap, secret,
// downwardAPI) and emptyDir. Unlike the kubelet, the contents are not
// refreshed afterwards (ConfigMap changes, token rotation: tokens last
// tokenLifetime).

// supportedVolume reports whether this node can provide v.
func supportedVolume(v *corev1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.Projected != nil || v.EmptyDir != nil
}

// writeVolumes writes every volume of the pod into dir/volumes and returns
// each one's folder by volume name. That includes the ServiceAccount
// admission plugin's kube-api-access volume (token, the kube-root-ca.crt
// ConfigMap's ca.crt, namespace), so in-cluster configuration works as in a
// cluster; the KUBECONFIG of credentials.go is there as well.
func (n *provider) writeVolumes(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	out := map[string]string{}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		folder := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(folder, 0o755); err != nil {
			return nil, err
		}
		if err := n.writeVolume(ctx, pod, v, folder); err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		out[v.Name] = folder
	}
	return out, nil
}

func (n *provider) writeVolume(ctx context.Context, pod *corev1.Pod, v *corev1.Volume, folder string) error {
	switch {
	case v.EmptyDir != nil:
		return nil
	case v.ConfigMap != nil:
		return n.writeConfigMap(pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, folder)
	case v.Secret != nil:
		return n.writeSecret(pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, folder)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if err := n.writeProjection(ctx, pod, s, folder); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unsupported volume kind")
}

func (n *provider) writeProjection(ctx context.Context, pod *corev1.Pod, s corev1.VolumeProjection, folder string) error {
	switch {
	case s.ConfigMap != nil:
		return n.writeConfigMap(pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, folder)
	case s.Secret != nil:
		return n.writeSecret(pod.Namespace, s.Secret.Name, s.Secret.Items, s.Secret.Optional, folder)
	case s.ServiceAccountToken != nil:
		token, err := n.projectedToken(ctx, pod, s.ServiceAccountToken)
		if err != nil {
			return err
		}
		return writeFile(folder, s.ServiceAccountToken.Path, []byte(token))
	case s.DownwardAPI != nil:
		for _, item := range s.DownwardAPI.Items {
			if item.FieldRef == nil {
				return fmt.Errorf("downwardAPI item %s: only fieldRef is supported", item.Path)
			}
			val, err := fieldRefValue(item.FieldRef, pod, runtimeFields{})
			if err != nil {
				return err
			}
			if err := writeFile(folder, item.Path, []byte(val)); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unsupported projection (this node projects serviceAccountToken, configMap, secret and downwardAPI)")
}

func (n *provider) writeConfigMap(ns, name string, items []corev1.KeyToPath, optional *bool, folder string) error {
	cm, err := n.cfg.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		if optional != nil && *optional {
			return nil
		}
		return fmt.Errorf("configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return writeKeys(data, items, folder, fmt.Sprintf("ConfigMap %s/%s", ns, name))
}

func (n *provider) writeSecret(ns, name string, items []corev1.KeyToPath, optional *bool, folder string) error {
	sec, err := n.cfg.Client.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		if optional != nil && *optional {
			return nil
		}
		return fmt.Errorf("secret %q: %w", name, err)
	}
	return writeKeys(sec.Data, items, folder, fmt.Sprintf("Secret %s/%s", ns, name))
}

// writeKeys writes every key as a file of its name, or only items, each
// at its path (a missing key is an error, as the kubelet's).
func writeKeys(data map[string][]byte, items []corev1.KeyToPath, folder, what string) error {
	if len(items) == 0 {
		for k, v := range data {
			if err := writeFile(folder, k, v); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		if err := writeFile(folder, it.Path, v); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes data at rel under folder; rel must stay inside it.
func writeFile(folder, rel string, data []byte) error {
	if rel == "" || filepath.IsAbs(rel) || strings.HasPrefix(filepath.Clean(rel), "..") {
		return fmt.Errorf("volume path %q must be relative and inside the volume", rel)
	}
	p := filepath.Join(folder, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// projectedToken asks for a token of the pod's ServiceAccount bound to the
// pod with the projection's audience and lifetime (the kubelet's default
// lifetime is an hour; this node never refreshes, so it asks for at least
// tokenLifetime).
func (n *provider) projectedToken(ctx context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(max(ptr.Deref(p.ExpirationSeconds, 3600), int64(tokenLifetime.Seconds()))),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	return n.tokenFor(ctx, pod, req)
}
