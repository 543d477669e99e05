// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package manifests

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

var update = flag.Bool("update", false, "rewrite manifests/*.yaml from the chart (make manifests)")

// From this package's folder, where go test runs it.
const (
	repoRoot = "../.."
	chartDir = repoRoot + "/" + ChartDir
)

// TestManifestsMatchChart fails when manifests/*.yaml are not what the chart
// renders with its default values (Generate): edit the chart, then run
// `make manifests`.
func TestManifestsMatchChart(t *testing.T) {
	files, err := Generate(t.Context(), chartDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repoRoot, "manifests")
	shipped, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, f := range files {
		want[f.Name] = f.Data
	}
	if *update {
		for _, p := range shipped {
			if _, ok := want[filepath.Base(p)]; !ok {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	var names []string
	for _, p := range shipped {
		names = append(names, filepath.Base(p))
	}
	if got, wantNames := names, fileNames(files); !slices.Equal(got, wantNames) {
		t.Errorf("manifests/*.yaml are %v; the chart renders %v: run make manifests", got, wantNames)
	}
	for _, p := range shipped {
		w, ok := want[filepath.Base(p)]
		if !ok {
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(strings.Split(string(w), "\n"), strings.Split(string(got), "\n")); d != "" {
			t.Errorf("manifests/%s differs from the chart's rendering (-chart +file): edit %s and run make manifests\n%s",
				filepath.Base(p), ChartDir, d)
		}
	}
}

func fileNames(files []File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Name)
	}
	return out
}

// rendered is the chart's output for one set of values, decoded.
type rendered struct {
	files   []File
	objects []runtime.Object
}

func render(t *testing.T, namespace string, values map[string]any) rendered {
	t.Helper()
	files, err := Render(t.Context(), chartDir, Options{ReleaseName: "r", Namespace: namespace, Values: values})
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{files: files}
	for _, f := range files {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(f.Data), 4096)
		for {
			var raw runtime.RawExtension
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			if len(bytes.TrimSpace(raw.Raw)) == 0 || string(raw.Raw) == "null" {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v\n%s", f.Name, err, raw.Raw)
			}
			r.objects = append(r.objects, obj)
		}
	}
	return r
}

// keys lists "Kind namespace/name" of every object.
func (r rendered) keys() []string {
	var out []string
	for _, o := range r.objects {
		m, err := meta(o)
		if err != nil {
			panic(err)
		}
		out = append(out, fmt.Sprintf("%s %s/%s", o.GetObjectKind().GroupVersionKind().Kind, m.ns, m.name))
	}
	return out
}

type nsName struct{ ns, name string }

func meta(o runtime.Object) (nsName, error) {
	a, ok := o.(interface {
		GetNamespace() string
		GetName() string
	})
	if !ok {
		return nsName{}, fmt.Errorf("%T has no object metadata", o)
	}
	return nsName{a.GetNamespace(), a.GetName()}, nil
}

func (r rendered) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	for _, o := range r.objects {
		if d, ok := o.(*appsv1.Deployment); ok {
			return d
		}
	}
	t.Fatalf("no Deployment among %v", r.keys())
	return nil
}

func (r rendered) service(t *testing.T) *corev1.Service {
	t.Helper()
	for _, o := range r.objects {
		if s, ok := o.(*corev1.Service); ok {
			return s
		}
	}
	t.Fatalf("no Service among %v", r.keys())
	return nil
}

func (r rendered) pdb() *policyv1.PodDisruptionBudget {
	for _, o := range r.objects {
		if p, ok := o.(*policyv1.PodDisruptionBudget); ok {
			return p
		}
	}
	return nil
}

func env(d *appsv1.Deployment) map[string]string {
	out := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		v := e.Value
		if e.ValueFrom != nil {
			v = "valueFrom"
		}
		out[e.Name] = v
	}
	return out
}

func args(d *appsv1.Deployment) []string { return d.Spec.Template.Spec.Containers[0].Args }

// TestChartDefaults: what helm install creates with no values, in the
// release namespace, in the files manifests/ has.
func TestChartDefaults(t *testing.T) {
	r := render(t, "infermesh-system", nil)
	if got, want := fileNames(r.files), []string{"10-rbac.yaml", "20-deployment.yaml"}; !slices.Equal(got, want) {
		t.Errorf("files %v, want %v (no Namespace without createNamespace)", got, want)
	}
	want := []string{
		"ServiceAccount infermesh-system/pilot-discovery",
		"ClusterRole /infermesh-pilot-discovery",
		"ClusterRoleBinding /infermesh-pilot-discovery",
		"ClusterRole /infermesh-pilot-discovery-gateway-deployments",
		"ClusterRoleBinding /infermesh-pilot-discovery-gateway-deployments",
		"Role infermesh-system/pilot-discovery-leader-election",
		"RoleBinding infermesh-system/pilot-discovery-leader-election",
		"Service infermesh-system/pilot-discovery",
		"Deployment infermesh-system/pilot-discovery",
		"PodDisruptionBudget infermesh-system/pilot-discovery",
	}
	if d := cmp.Diff(want, r.keys()); d != "" {
		t.Errorf("objects (-want +got):\n%s", d)
	}
	d := r.deployment(t)
	c := d.Spec.Template.Spec.Containers[0]
	if *d.Spec.Replicas != 2 || c.Image != "ghcr.io/infermesh/pilot-discovery:latest" {
		t.Errorf("replicas %d, image %q", *d.Spec.Replicas, c.Image)
	}
	if !slices.Contains(args(d), "--debug-address=127.0.0.1:15015") || !slices.Contains(args(d), "--xds-auth=serviceaccount") {
		t.Errorf("args %v: want the debug endpoints on loopback and --xds-auth=serviceaccount", args(d))
	}
	if got, want := env(d), map[string]string{"POD_NAMESPACE": "valueFrom", "ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true", "GOMEMLIMIT": "valueFrom"}; !cmp.Equal(got, want) {
		t.Errorf("env %v, want %v", got, want)
	}
	if a := d.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("affinity %+v, want one preferred pod anti-affinity term", a)
	}
	if v := d.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].Secret.SecretName != "pilot-discovery-ads-tls" {
		t.Errorf("volumes %+v, want the Secret pilot-discovery-ads-tls", v)
	}
	if p := r.pdb(); p == nil || p.Spec.MinAvailable.IntValue() != 1 || p.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget %+v, want minAvailable 1", p)
	}
	if ports := r.service(t).Spec.Ports; len(ports) != 2 {
		t.Errorf("Service ports %+v, want ADS and monitoring only", ports)
	}
}

func TestChartValues(t *testing.T) {
	t.Run("image, replicas, resources, env, extraArgs", func(t *testing.T) {
		d := render(t, "infermesh-system", map[string]any{
			"image":        map[string]any{"repository": "registry.example/pd", "tag": "v1.2.3", "pullPolicy": "Always"},
			"replicaCount": 3,
			"resources":    map[string]any{"limits": nil, "requests": map[string]any{"cpu": "1", "memory": "2Gi"}},
			"env":          map[string]any{"PILOT_GATEWAY_API_CONTROLLER_NAME": "example.com/gw", "CLUSTER_DOMAIN": "corp.local"},
			"extraArgs":    []any{"--push-debounce=200ms"},
			"logLevel":     "debug",
		}).deployment(t)
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != "registry.example/pd:v1.2.3" || c.ImagePullPolicy != corev1.PullAlways || *d.Spec.Replicas != 3 {
			t.Errorf("image %q %q, replicas %d", c.Image, c.ImagePullPolicy, *d.Spec.Replicas)
		}
		if c.Resources.Limits != nil || c.Resources.Requests.Memory().String() != "2Gi" {
			t.Errorf("resources %+v, want the requests given and no limits", c.Resources)
		}
		// No memory limit: no GOMEMLIMIT (it would be the node's memory).
		want := map[string]string{"POD_NAMESPACE": "valueFrom", "ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true",
			"PILOT_GATEWAY_API_CONTROLLER_NAME": "example.com/gw", "CLUSTER_DOMAIN": "corp.local"}
		if got := env(d); !cmp.Equal(got, want) {
			t.Errorf("env %v, want %v", got, want)
		}
		if a := args(d); a[len(a)-1] != "--push-debounce=200ms" || !slices.Contains(a, "--log-level=debug") {
			t.Errorf("args %v", a)
		}
	})
	t.Run("ADS TLS Secret and the Gateways' CA", func(t *testing.T) {
		d := render(t, "infermesh-system", map[string]any{
			"adsTLS": map[string]any{"secretName": "ads-cert", "gatewayCA": true},
		}).deployment(t)
		if v := d.Spec.Template.Spec.Volumes; v[0].Secret.SecretName != "ads-cert" {
			t.Errorf("volume %+v, want the Secret ads-cert", v[0])
		}
		if got := env(d)["PILOT_GATEWAY_XDS_CA_FILE"]; got != "/etc/infermesh/ads-tls/ca.crt" {
			t.Errorf("PILOT_GATEWAY_XDS_CA_FILE = %q", got)
		}
	})
	t.Run("debug port exposed", func(t *testing.T) {
		r := render(t, "infermesh-system", map[string]any{"debug": map[string]any{"expose": true, "port": 9999}})
		d := r.deployment(t)
		if !slices.Contains(args(d), "--debug-address=:9999") {
			t.Errorf("args %v, want --debug-address=:9999", args(d))
		}
		if p := d.Spec.Template.Spec.Containers[0].Ports; len(p) != 3 || p[2].Name != "http-debug" || p[2].ContainerPort != 9999 {
			t.Errorf("container ports %+v", p)
		}
		if p := r.service(t).Spec.Ports; len(p) != 3 || p[2].Port != 9999 || p[2].TargetPort.StrVal != "http-debug" {
			t.Errorf("Service ports %+v", p)
		}
	})
	t.Run("ADS authorization off: no TokenReviews", func(t *testing.T) {
		grants := func(r rendered) bool {
			for _, o := range r.objects {
				if cr, ok := o.(*rbacv1.ClusterRole); ok {
					for _, rule := range cr.Rules {
						if slices.Contains(rule.Resources, "tokenreviews") {
							return true
						}
					}
				}
			}
			return false
		}
		if !grants(render(t, "infermesh-system", nil)) {
			t.Error("xdsAuth=serviceaccount (the default) without tokenreviews create")
		}
		r := render(t, "infermesh-system", map[string]any{"xdsAuth": "none"})
		if grants(r) {
			t.Error("xdsAuth=none grants tokenreviews create")
		}
		if !slices.Contains(args(r.deployment(t)), "--xds-auth=none") {
			t.Errorf("args %v, want --xds-auth=none", args(r.deployment(t)))
		}
	})
	t.Run("no Gateway deployments", func(t *testing.T) {
		r := render(t, "infermesh-system", map[string]any{"gatewayDeployments": map[string]any{"enabled": false}})
		for _, k := range r.keys() {
			if strings.Contains(k, "gateway-deployments") {
				t.Errorf("%s rendered with gatewayDeployments.enabled=false", k)
			}
		}
		if got := env(r.deployment(t))["PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER"]; got != "false" {
			t.Errorf("PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER = %q, want false", got)
		}
	})
	t.Run("env wins over what values imply", func(t *testing.T) {
		d := render(t, "infermesh-system", map[string]any{
			"gatewayDeployments": map[string]any{"enabled": false},
			"env":                map[string]any{"PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER": "true"},
		}).deployment(t)
		var n int
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER" {
				n++
				if e.Value != "true" {
					t.Errorf("value %q, want env's true", e.Value)
				}
			}
		}
		if n != 1 {
			t.Errorf("PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER set %d times, want once", n)
		}
	})
	t.Run("pod disruption budget", func(t *testing.T) {
		p := render(t, "infermesh-system", map[string]any{"podDisruptionBudget": map[string]any{"maxUnavailable": "50%"}}).pdb()
		if p == nil || p.Spec.MinAvailable != nil || p.Spec.MaxUnavailable.String() != "50%" {
			t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 50%% only", p)
		}
		if p := render(t, "infermesh-system", map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}}).pdb(); p != nil {
			t.Errorf("PodDisruptionBudget rendered with enabled=false")
		}
	})
	t.Run("topology spread and affinity", func(t *testing.T) {
		d := render(t, "infermesh-system", map[string]any{
			"podAntiAffinity": "required",
			"topologySpreadConstraints": []any{
				map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"},
				map[string]any{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
					"labelSelector": map[string]any{"matchLabels": map[string]any{"tier": "control"}}},
			},
		}).deployment(t)
		tsc := d.Spec.Template.Spec.TopologySpreadConstraints
		if len(tsc) != 2 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" ||
			!cmp.Equal(tsc[0].LabelSelector.MatchLabels, map[string]string{"app.kubernetes.io/name": "pilot-discovery"}) ||
			!cmp.Equal(tsc[1].LabelSelector.MatchLabels, map[string]string{"tier": "control"}) {
			t.Errorf("topologySpreadConstraints %+v: want the pods' labels where none were given, the given ones kept", tsc)
		}
		if a := d.Spec.Template.Spec.Affinity.PodAntiAffinity; len(a.RequiredDuringSchedulingIgnoredDuringExecution) != 1 || a.PreferredDuringSchedulingIgnoredDuringExecution != nil {
			t.Errorf("podAntiAffinity %+v, want one required term", a)
		}
		d = render(t, "infermesh-system", map[string]any{"podAntiAffinity": "none"}).deployment(t)
		if d.Spec.Template.Spec.Affinity != nil {
			t.Errorf("affinity %+v with podAntiAffinity none", d.Spec.Template.Spec.Affinity)
		}
	})
	t.Run("another namespace", func(t *testing.T) {
		r := render(t, "mesh", nil)
		for _, o := range r.objects {
			m, _ := meta(o)
			switch o.(type) {
			case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
				if b, ok := o.(*rbacv1.ClusterRoleBinding); ok && b.Subjects[0].Namespace != "mesh" {
					t.Errorf("ClusterRoleBinding %s binds %+v", m.name, b.Subjects)
				}
			default:
				if m.ns != "mesh" {
					t.Errorf("%T %s in namespace %q, want mesh", o, m.name, m.ns)
				}
			}
		}
		if got := env(r.deployment(t))["PILOT_GATEWAY_XDS_ADDRESS"]; got != "pilot-discovery.mesh.svc:15010" {
			t.Errorf("PILOT_GATEWAY_XDS_ADDRESS = %q, want the Service in mesh", got)
		}
	})
}

// TestChartSchemaRejects: values.schema.json refuses bad values before
// anything is rendered, naming the value.
func TestChartSchemaRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"unknown key", map[string]any{"replicas": 2}, "replicas"},
		{"replicas not a number", map[string]any{"replicaCount": "two"}, "replicaCount"},
		{"negative replicas", map[string]any{"replicaCount": -1}, "replicaCount"},
		{"env value not a string", map[string]any{"env": map[string]any{"CLUSTER_DOMAIN": true}}, "CLUSTER_DOMAIN"},
		{"env name", map[string]any{"env": map[string]any{"NOT A NAME": "x"}}, "NOT A NAME"},
		{"xdsAuth", map[string]any{"xdsAuth": "token"}, "xdsAuth"},
		{"logLevel", map[string]any{"logLevel": "verbose"}, "logLevel"},
		{"pullPolicy", map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "pullPolicy"},
		{"debug port", map[string]any{"debug": map[string]any{"port": 70000}}, "port"},
		{"empty Secret name", map[string]any{"adsTLS": map[string]any{"secretName": ""}}, "secretName"},
		{"minAvailable", map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": "half"}}, "minAvailable"},
		{"podAntiAffinity", map[string]any{"podAntiAffinity": "soft"}, "podAntiAffinity"},
		{"topology spread without a key", map[string]any{"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1}}}, "topologyKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(t.Context(), chartDir, Options{ReleaseName: "r", Namespace: "infermesh-system", Values: tc.values})
			if err == nil {
				t.Fatalf("values %v rendered; want the schema to refuse them", tc.values)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}
