// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package helm_test runs the real helm (v4, built by hack/helm.sh) on the
// chart manifests/charts/infermesh against real API servers
// (pkg/test/kubeenv): helm lint, the chart's values.schema.json refusing bad
// values, `helm install` creating the same objects as `kubectl apply
// --server-side -f manifests/`, and `helm upgrade`
// with changed values rolling the Deployment.
package helm_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/infermesh/infermesh/pkg/manifests"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/kubeobj"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

const (
	// From this package's folder, where go test runs it.
	repoRoot     = "../../.."
	chartDir     = repoRoot + "/" + manifests.ChartDir
	manifestsDir = repoRoot + "/manifests"

	release   = manifests.ReleaseName
	namespace = manifests.Namespace

	// binariesEnv names the folder holding helm: the one hack/helm.sh
	// prints, plus /bin (make integ sets it).
	binariesEnv = "HELM_TEST_BINARIES"
)

// The deployment and ReplicaSet controllers, so an upgrade shows as a
// rollout (a new ReplicaSet for the new pod template).
var controllers = kubeenv.WithControllers("deployment-controller", "replicaset-controller")

// helmInstaller marks what helm adds to every object it installs.
var helmInstaller = kubeobj.Ignore{
	Labels:      []string{"app.kubernetes.io/managed-by"},
	Annotations: []string{"meta.helm.sh/release-name", "meta.helm.sh/release-namespace"},
}

// helmCLI runs the real helm against one cluster, with its own
// configuration, cache and data folders.
type helmCLI struct {
	bin        string
	kubeconfig string
	home       string
}

func newHelm(t *testing.T, kubeconfig string) helmCLI {
	t.Helper()
	dir := os.Getenv(binariesEnv)
	if dir == "" {
		t.Fatalf("%s is not set: build helm with hack/helm.sh (or run `make integ`) and set it to the folder it prints plus /bin", binariesEnv)
	}
	bin := filepath.Join(dir, "helm")
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("no executable helm in %s=%s (hack/helm.sh builds it): %v", binariesEnv, dir, err)
	}
	return helmCLI{bin: bin, kubeconfig: kubeconfig, home: t.TempDir()}
}

// run runs helm with args and returns its combined output and error.
func (h helmCLI) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), h.bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(h.home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(h.home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(h.home, "data"),
	)
	if h.kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+h.kubeconfig)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// must runs helm and fails the test unless it exits 0.
func (h helmCLI) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := h.run(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func TestLint(t *testing.T) {
	h := newHelm(t, "")
	h.must(t, "lint", "--strict", chartDir)
	// Rendered as helm template does, for another namespace too.
	out := h.must(t, "template", release, chartDir, "--namespace", "mesh")
	if !strings.Contains(out, "value: \"pilot-discovery.mesh.svc:15010\"") {
		t.Errorf("helm template --namespace mesh: no PILOT_GATEWAY_XDS_ADDRESS for the Service in mesh:\n%s", out)
	}
}

// TestSchemaRefusesBadValues: helm lint, template and install refuse values
// that values.schema.json forbids, naming the value, and install creates
// nothing.
func TestSchemaRefusesBadValues(t *testing.T) {
	env := kubeenv.Start(t)
	h := newHelm(t, env.Kubeconfig)
	for _, tc := range []struct {
		set, want string
	}{
		{"replicaCount=-1", "/replicaCount"},
		{"xdsAuth=token", "/xdsAuth"},
		{"image.pullPolicy=Sometimes", "/image/pullPolicy"},
		{"env.CLUSTER_DOMAIN=true", "/env/CLUSTER_DOMAIN"}, // --set makes true a boolean
		{"debug.port=15010", "/debug/port"},
		{"replica=2", "replica"},
	} {
		for _, cmd := range [][]string{
			{"lint", "--strict", chartDir, "--set", tc.set},
			{"template", release, chartDir, "--set", tc.set},
			{"install", release, chartDir, "--namespace", namespace, "--create-namespace", "--set", tc.set},
		} {
			out, err := h.run(t, cmd...)
			if err == nil {
				t.Errorf("helm %s: exit 0, want the schema to refuse %s", strings.Join(cmd, " "), tc.set)
				continue
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("helm %s: output does not name %q:\n%s", strings.Join(cmd, " "), tc.want, out)
			}
		}
	}
	kc := kubernetes.NewForConfigOrDie(env.RESTConfig())
	if d, err := kc.AppsV1().Deployments(namespace).List(t.Context(), metav1.ListOptions{}); err != nil || len(d.Items) != 0 {
		t.Errorf("after refused installs: Deployments %v, %v; want none", d, err)
	}
	if out := h.must(t, "list", "--all-namespaces", "--short"); strings.TrimSpace(out) != "" {
		t.Errorf("after refused installs, helm list shows releases: %s", out)
	}
}

// TestInstallMatchesManifests: helm install of the chart with no values
// gives, object for object and field for field, what `kubectl apply
// --server-side -f manifests/` gives on a cluster of its own; then helm
// upgrade with changed values rolls the Deployment.
func TestInstallMatchesManifests(t *testing.T) {
	ctx := t.Context()
	kubectlEnv := kubeenv.Start(t, controllers)
	helmEnv := kubeenv.Start(t, controllers)

	objs := kubeobj.ApplyDir(t, kubectlEnv.RESTConfig(), manifestsDir)
	h := newHelm(t, helmEnv.Kubeconfig)
	h.must(t, "install", release, chartDir, "--namespace", namespace, "--create-namespace")

	// helm's release holds every object of manifests/ but the Namespace,
	// which --create-namespace makes, and nothing else.
	released, err := kubeobj.Parse([]byte(h.must(t, "get", "manifest", release, "--namespace", namespace)))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, o := range objs {
		if o.GetKind() != "Namespace" {
			want = append(want, objectKey(o))
		}
	}
	got := keys(released)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("helm's release manifest holds %v, want the objects of manifests/ but the Namespace: %v", got, want)
	}

	// Both controllers have had their say (a ReplicaSet each) before reading.
	fromKubectl := live(t, kubectlEnv, objs)
	fromHelm := live(t, helmEnv, objs)
	isNamespace := func(o *unstructured.Unstructured) bool { return o.GetKind() == "Namespace" }
	nsKubectl, restKubectl := split(fromKubectl, isNamespace)
	nsHelm, restHelm := split(fromHelm, isNamespace)
	if len(restKubectl) < 10 {
		t.Fatalf("manifests/ has %d objects besides the Namespace: %v", len(restKubectl), keys(restKubectl))
	}
	if d := kubeobj.Diff(restKubectl, restHelm, helmInstaller); d != "" {
		t.Errorf("helm install and kubectl apply -f manifests/ give different objects:\n%s", d)
	}
	// The Namespace comes from helm's --create-namespace, which labels it
	// name=<namespace> and not with the chart's part-of label: compared
	// without those labels.
	if d := kubeobj.Diff(nsKubectl, nsHelm, kubeobj.Ignore{Labels: []string{"name", "app.kubernetes.io/part-of"}}); d != "" || len(nsHelm) != 1 {
		t.Errorf("Namespace (%d):\n%s", len(nsHelm), d)
	}

	// An upgrade that changes the pod template rolls the Deployment: a new
	// generation, a second ReplicaSet for the new template, revision 2.
	kc := kubernetes.NewForConfigOrDie(helmEnv.RESTConfig())
	before, err := kc.AppsV1().Deployments(namespace).Get(ctx, "pilot-discovery", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.must(t, "upgrade", release, chartDir, "--namespace", namespace,
		"--set", "image.tag=v2", "--set", "replicaCount=3", "--set-string", "env.CLUSTER_DOMAIN=corp.local")
	after, err := kc.AppsV1().Deployments(namespace).Get(ctx, "pilot-discovery", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation <= before.Generation || *after.Spec.Replicas != 3 {
		t.Errorf("after helm upgrade: generation %d (was %d), replicas %d; want a new generation and 3 replicas",
			after.Generation, before.Generation, *after.Spec.Replicas)
	}
	c := after.Spec.Template.Spec.Containers[0]
	if c.Image != "ghcr.io/infermesh/pilot-discovery:v2" || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "CLUSTER_DOMAIN" && e.Value == "corp.local"
	}) {
		t.Errorf("after helm upgrade: image %q, env %+v", c.Image, c.Env)
	}
	var sets []appsv1.ReplicaSet
	poll.UntilOr(t, time.Minute, "two ReplicaSets of pilot-discovery, the new one with image v2, revision 2", func() bool {
		sets = replicaSets(t, kc)
		d, err := kc.AppsV1().Deployments(namespace).Get(ctx, "pilot-discovery", metav1.GetOptions{})
		return err == nil && len(sets) == 2 && d.Annotations["deployment.kubernetes.io/revision"] == "2" &&
			slices.ContainsFunc(sets, func(rs appsv1.ReplicaSet) bool {
				return rs.Spec.Template.Spec.Containers[0].Image == c.Image && rs.Annotations["deployment.kubernetes.io/revision"] == "2"
			})
	}, func() string { return fmt.Sprintf("ReplicaSets: %s", describe(sets)) })
	if sets[0].Labels["pod-template-hash"] == sets[1].Labels["pod-template-hash"] {
		t.Errorf("both ReplicaSets have pod-template-hash %q", sets[0].Labels["pod-template-hash"])
	}

	// An upgrade that leaves the pod template alone does not roll it.
	h.must(t, "upgrade", release, chartDir, "--namespace", namespace, "--reuse-values", "--set", "podDisruptionBudget.minAvailable=2")
	if pdb, err := kc.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, "pilot-discovery", metav1.GetOptions{}); err != nil || pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("PodDisruptionBudget after the second upgrade: %+v, %v; want minAvailable 2", pdb, err)
	}
	if d, err := kc.AppsV1().Deployments(namespace).Get(ctx, "pilot-discovery", metav1.GetOptions{}); err != nil || d.Generation != after.Generation {
		t.Errorf("Deployment after an upgrade that changes only the PodDisruptionBudget: generation %d, want %d (%v)", d.Generation, after.Generation, err)
	}
}

// live waits until the Deployment's ReplicaSet exists (the controllers'
// writes to the Deployment are done), then reads objs' live versions.
func live(t *testing.T, env *kubeenv.Env, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	kc := kubernetes.NewForConfigOrDie(env.RESTConfig())
	poll.Until(t, time.Minute, "the Deployment's first ReplicaSet and revision", func() bool {
		d, err := kc.AppsV1().Deployments(namespace).Get(t.Context(), "pilot-discovery", metav1.GetOptions{})
		return err == nil && d.Annotations["deployment.kubernetes.io/revision"] == "1" && len(replicaSets(t, kc)) == 1
	})
	a, err := kubeobj.NewApplier(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Live(t.Context(), objs...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func replicaSets(t *testing.T, kc kubernetes.Interface) []appsv1.ReplicaSet {
	t.Helper()
	l, err := kc.AppsV1().ReplicaSets(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=pilot-discovery"})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func describe(sets []appsv1.ReplicaSet) string {
	var b strings.Builder
	for _, rs := range sets {
		fmt.Fprintf(&b, "[%s image=%s revision=%s] ", rs.Name, rs.Spec.Template.Spec.Containers[0].Image, rs.Annotations["deployment.kubernetes.io/revision"])
	}
	return b.String()
}

// split returns the objects for which match holds, and the others, in order.
func split(objs []*unstructured.Unstructured, match func(*unstructured.Unstructured) bool) (yes, no []*unstructured.Unstructured) {
	for _, o := range objs {
		if match(o) {
			yes = append(yes, o)
		} else {
			no = append(no, o)
		}
	}
	return yes, no
}

func objectKey(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

func keys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, objectKey(o))
	}
	return out
}
