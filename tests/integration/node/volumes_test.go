// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package node_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// testVolumes: ConfigMap, Secret, projected (token with audience,
// downward API) and emptyDir volumes appear at their mount paths for the
// container alone (not on the host, not in the other container), read-only
// when asked; resourceFieldRef reads the container's limit. A volume
// mounted over the folder that holds the image's binary does not stop the
// container from starting (the Gateway API suite's coredns pod mounts its
// Corefile at /root, which can hold the binaries' cache).
func (c *cluster) testVolumes(t *testing.T) {
	ctx := context.Background()
	ns := c.namespace(t, "volumes")
	if _, err := c.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "boot"}, Data: map[string]string{"bootstrap.json": `{"a":1}`, "other": "o"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Data: map[string][]byte{"tls.crt": []byte("CERT")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Mount paths under a folder unique to this run, so nothing on the
	// host can hold them already.
	base := fmt.Sprintf("/tmp/nodetest-volumes-%d", os.Getpid())
	t.Cleanup(func() { os.RemoveAll(base) })
	a := appContainer("a", 8080)
	a.VolumeMounts = []corev1.VolumeMount{
		{Name: "boot", MountPath: base + "/envoy", ReadOnly: true},
		{Name: "tls", MountPath: base + "/tls", ReadOnly: true},
		{Name: "token", MountPath: base + "/token", ReadOnly: true},
		{Name: "scratch", MountPath: base + "/scratch"},
	}
	a.Env = append(a.Env, corev1.EnvVar{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}})
	a.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	b := appContainer("b", 8081)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	over := appContainer("over", 8082)
	over.VolumeMounts = []corev1.VolumeMount{{Name: "boot", MountPath: filepath.Dir(self), ReadOnly: true}}
	pod := appPod(ns, "vols", a, b, over)
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "boot", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "boot"}, Items: []corev1.KeyToPath{{Key: "bootstrap.json", Path: "bootstrap.json"}}}}},
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "xds", Path: "token", ExpirationSeconds: ptr.To[int64](3600)}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "ns", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	c.create(t, pod)
	p := c.waitPod(t, ns, "vols", "Running and Ready", waitBound, isReady)
	file := func(port int, path string) string {
		return httpGet(t, fmt.Sprintf("http://%s:%d/file?path=%s", p.Status.PodIP, port, url.QueryEscape(path)))
	}
	if got := file(8080, base+"/envoy/bootstrap.json"); got != `{"a":1}` {
		t.Errorf("ConfigMap item: %q", got)
	}
	if _, err := tryGet(fmt.Sprintf("http://%s:8080/file?path=%s", p.Status.PodIP, url.QueryEscape(base+"/envoy/other"))); err == nil {
		t.Error("ConfigMap key not among the items is there")
	}
	if got := file(8082, filepath.Join(filepath.Dir(self), "bootstrap.json")); got != `{"a":1}` {
		t.Errorf("ConfigMap mounted over the binary's folder: %q", got)
	}
	if got := file(8080, base+"/tls/tls.crt"); got != "CERT" {
		t.Errorf("Secret key: %q", got)
	}
	if got := file(8080, base+"/token/ns"); got != ns {
		t.Errorf("downward API file: %q, want %q", got, ns)
	}
	claims := jwtClaims(t, file(8080, base+"/token/token"))
	if aud, _ := json.Marshal(claims["aud"]); string(aud) != `["xds"]` || !strings.Contains(fmt.Sprint(claims["kubernetes.io"]), "vols") {
		t.Errorf("projected token claims %v: want audience xds, bound to pod vols", claims)
	}
	if got := httpGet(t, fmt.Sprintf("http://%s:8080/write?path=%s", p.Status.PodIP, url.QueryEscape(base+"/envoy/x"))); !strings.Contains(got, "read-only") {
		t.Errorf("write to a readOnly mount: %q, want a read-only file system error", got)
	}
	if got := httpGet(t, fmt.Sprintf("http://%s:8080/write?path=%s", p.Status.PodIP, url.QueryEscape(base+"/scratch/x"))); got != "written" {
		t.Errorf("write to emptyDir: %q", got)
	}
	// The other container and the host see empty mount points.
	if _, err := tryGet(fmt.Sprintf("http://%s:8081/file?path=%s", p.Status.PodIP, url.QueryEscape(base+"/tls/tls.crt"))); err == nil {
		t.Error("container b, which mounts nothing, sees a's Secret")
	}
	if _, err := os.Stat(base + "/tls/tls.crt"); err == nil {
		t.Error("the host sees the container's Secret mount")
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(httpGet(t, fmt.Sprintf("http://%s:8080/env", p.Status.PodIP))), &env); err != nil {
		t.Fatal(err)
	}
	if env["MEM"] != "1073741824" {
		t.Errorf("resourceFieldRef limits.memory: %q, want 1073741824", env["MEM"])
	}
}

// jwtClaims decodes a JWT's claims (no verification: the API server issued it).
func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(b, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// testLateSecret: a pod whose Secret volume names a Secret that does not
// exist yet waits, not running, and starts once the Secret is created, as
// the kubelet keeps retrying a mount (the Gateway API suite creates its
// base pods' Secrets after the pods).
func (c *cluster) testLateSecret(t *testing.T) {
	ctx := context.Background()
	ns := c.namespace(t, "late-secret")
	a := appContainer("a", 8080)
	a.VolumeMounts = []corev1.VolumeMount{{Name: "tls", MountPath: fmt.Sprintf("/tmp/nodetest-late-%d", os.Getpid()), ReadOnly: true}}
	pod := appPod(ns, "late", a)
	pod.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "later"}}}}
	c.create(t, pod)
	c.waitPod(t, ns, "late", "a FailedMount wait", waitBound, func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running == nil && p.Status.ContainerStatuses[0].RestartCount == 0 &&
			p.Status.Phase == corev1.PodPending
	})
	time.Sleep(2 * time.Second) // past the first retries
	if p, err := c.client.CoreV1().Pods(ns).Get(ctx, "late", metav1.GetOptions{}); err != nil || isReady(p) {
		t.Fatalf("pod Ready before its Secret exists (err %v)", err)
	}
	if _, err := c.client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"}, Data: map[string][]byte{"tls.crt": []byte("LATE")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := c.waitPod(t, ns, "late", "Running and Ready after the Secret appeared", waitBound, isReady)
	if got := httpGet(t, fmt.Sprintf("http://%s:8080/file?path=%s", p.Status.PodIP, url.QueryEscape(fmt.Sprintf("/tmp/nodetest-late-%d/tls.crt", os.Getpid())))); got != "LATE" {
		t.Errorf("late Secret's key: %q", got)
	}
}
