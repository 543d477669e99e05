// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package traffic

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The seed's own model-server Deployment configures the simulator as the
// seed's image would run: its pod template, read from examples/seed.
func TestSimConfigFromSeedPod(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "seed", "10-model-servers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		t.Fatal(err)
	}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: "vllm-llama3-8b-abc-12345"}, Spec: d.Spec.Template.Spec}
	sc, err := SimConfigFromPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Port != 8000 || sc.Config.PodName != pod.Name || sc.Config.Model != "meta-llama/Llama-3.1-8B-Instruct" ||
		sc.Config.MaxLoRAs != 2 || !slices.Equal(sc.Config.LoRAs, []string{"reviews-1"}) {
		t.Errorf("got %+v", sc)
	}
}

func TestSimConfigFromPodErrors(t *testing.T) {
	pod := func(args ...string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sim", Args: args}}}}
	}
	for _, tc := range []struct {
		name    string
		pod     corev1.Pod
		wantErr string
	}{
		{"no container", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}, "pod ns/p has no container"},
		{"unknown flag", pod("--model", "m", "--port", "8000", "--seed", "1"), "flag --seed is not one"},
		{"flag without value", pod("--model", "m", "--port"), "--port has no value"},
		{"bad port", pod("--model", "m", "--port", "http"), `--port "http"`},
		{"bad LoRA", pod("--model", "m", "--port", "8000", "--lora-modules", "reviews-1"), `--lora-modules "reviews-1"`},
		{"no model", pod("--port", "8000"), "no --model"},
		{"no port", pod("--model", "m"), "no --port"},
		{"not a flag", pod("serve", "m"), `argument "serve"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SimConfigFromPod(tc.pod)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			if err != nil && tc.pod.Spec.Containers != nil && !strings.Contains(err.Error(), "pod ns/p container sim") {
				t.Errorf("error %v does not name the pod and container", err)
			}
		})
	}
}
