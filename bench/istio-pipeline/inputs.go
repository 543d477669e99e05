// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	inferencescheme "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned/scheme"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayscheme "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/scheme"
	"sigs.k8s.io/yaml"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pkg/kube/endpointslice"
)

// The names hack/gen-pools.sh uses.
const (
	poolNamespace    = "llm-namespace"
	gatewayNamespace = "gateway-namespace"
	eppService       = "vllm-llama3-8b-epp"
	eppPort          = 9002
	// className is the GatewayClass both control planes implement by
	// default, with the controller name both use by default.
	className      = "istio"
	controllerName = "istio.io/gateway-controller"
	clusterDomain  = "cluster.local"
	// shadowPort is the shadow Service's first port, both sides' convention.
	shadowPort = 54321
	// routeConfig is the RDS name of the Gateways' HTTP port 80.
	routeConfig = "http.80"
	// gatewayNameLabel selects a Gateway's proxies (Gateway API's
	// well-known label).
	gatewayNameLabel = "gateway.networking.k8s.io/gateway-name"
)

// Inputs is one generated cluster: the folder hack/gen-pools.sh writes for
// Pools pools of PodsPerPool pods over Gateways Gateways, decoded, plus
// what the cluster's own controllers hold beside those manifests in a real
// cluster: the GatewayClass, each pool's shadow Service (as both control
// planes write it) and the EndpointSlices of every Service with a selector
// (as kube-controller-manager would compute them, pkg/kube/endpointslice).
// Both sides start from these objects in their own fake API client; neither
// has to write anything to serve them.
type Inputs struct {
	Pools, PodsPerPool, Gateways int
	// Objects are the typed Kubernetes, Gateway API and inference
	// extension objects (Namespaces, GatewayClass, Gateways, HTTPRoutes,
	// InferencePools, Services, EndpointSlices, Pods, the EPP Deployment).
	Objects []runtime.Object
	// DestinationRules are the networking.istio.io/v1 documents (the EPP's
	// TLS settings), decoded for our fake client; DestinationRuleYAML holds
	// the same documents as text for Istio's config store.
	DestinationRules    []*unstructured.Unstructured
	DestinationRuleYAML string
	// Pool is every pool in order, with what the proxies should receive.
	Pool []Pool
	// GatewayNames are the Gateways' names in gateway-namespace.
	GatewayNames []string
}

// Pool is one generated pool and the configuration its Gateway's proxies
// should receive for it.
type Pool struct {
	Name    string
	Gateway string // the Gateway's name; its namespace is gateway-namespace
	Host    string // the HTTPRoute's hostname
	Shadow  string // shadow Service name
	Cluster string // the EDS cluster of the shadow Service
	Route   *gwv1.HTTPRoute
	Pool    *inferencev1.InferencePool
	Slice   *discoveryv1.EndpointSlice // the shadow Service's one slice
}

// EPPCluster is the cluster of the EPP Service, as both sides name it.
func EPPCluster() string {
	return clusterName(eppPort, eppService+"."+poolNamespace+".svc."+clusterDomain)
}

func clusterName(port int, host string) string {
	return fmt.Sprintf("outbound|%d||%s", port, host)
}

// repoRoot is the infermesh checkout this module sits in (bench/istio-pipeline).
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "hack", "gen-pools.sh")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no hack/gen-pools.sh above %s", wd)
		}
	}
}

// Generate runs hack/gen-pools.sh into a temporary folder and loads it.
func Generate(pools, podsPerPool, gateways int) (*Inputs, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-istio-pools-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command("bash", filepath.Join(root, "hack", "gen-pools.sh"), dir,
		fmt.Sprint(pools), fmt.Sprint(podsPerPool), fmt.Sprint(gateways))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("hack/gen-pools.sh: %v: %s", err, out)
	}
	return Load(dir, pools, podsPerPool, gateways)
}

// decoder decodes the typed kinds of the folder.
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gatewayscheme.AddToScheme, inferencescheme.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// Load reads a gen-pools.sh folder (every *.yaml below dir) and adds the
// cluster-side objects.
func Load(dir string, pools, podsPerPool, gateways int) (*Inputs, error) {
	in := &Inputs{Pools: pools, PodsPerPool: podsPerPool, Gateways: gateways}
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var (
		pods     []*corev1.Pod
		services []*corev1.Service
		drYAML   []string
		byName   = map[string]*Pool{}
		gwSeen   = map[string]bool{}
	)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			var meta struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			if meta.Kind == "" {
				continue // a document of comments only
			}
			if strings.HasPrefix(meta.APIVersion, "networking.istio.io/") {
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal(doc, &u.Object); err != nil {
					return nil, fmt.Errorf("%s: %v", f, err)
				}
				in.DestinationRules = append(in.DestinationRules, u)
				drYAML = append(drYAML, string(doc))
				continue
			}
			obj, _, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			switch o := obj.(type) {
			case *corev1.Pod:
				pods = append(pods, o)
			case *corev1.Service:
				services = append(services, o)
			case *gwv1.Gateway:
				gwSeen[o.Name] = true
				in.GatewayNames = append(in.GatewayNames, o.Name)
			case *inferencev1.InferencePool:
				p := poolEntry(byName, o.Name)
				p.Pool = o
			case *gwv1.HTTPRoute:
				p := poolEntry(byName, o.Name)
				p.Route = o
				if len(o.Spec.ParentRefs) != 1 || len(o.Spec.Hostnames) != 1 {
					return nil, fmt.Errorf("%s: HTTPRoute %s: want one parentRef and one hostname", f, o.Name)
				}
				p.Gateway = string(o.Spec.ParentRefs[0].Name)
				p.Host = string(o.Spec.Hostnames[0])
				o.Status = acceptedStatus(o)
			}
			in.Objects = append(in.Objects, obj)
		}
	}
	in.DestinationRuleYAML = strings.Join(drYAML, "\n---\n")
	in.Objects = append(in.Objects, &gwv1.GatewayClass{
		TypeMeta:   typeMeta("gateway.networking.k8s.io/v1", "GatewayClass"),
		ObjectMeta: objectMeta("", className),
		Spec:       gwv1.GatewayClassSpec{ControllerName: controllerName},
	})

	// Pods by their app label: each pool selects one app, the EPP another.
	podsByApp := map[string][]*corev1.Pod{}
	for _, p := range pods {
		podsByApp[p.Labels["app"]] = append(podsByApp[p.Labels["app"]], p)
	}
	for _, name := range sortedKeys(byName) {
		p := byName[name]
		if p.Pool == nil || p.Route == nil {
			return nil, fmt.Errorf("pool %s: want an InferencePool and an HTTPRoute", name)
		}
		if !gwSeen[p.Gateway] {
			return nil, fmt.Errorf("HTTPRoute %s: no Gateway %s", name, p.Gateway)
		}
		svc, err := shadowService(p.Pool)
		if err != nil {
			return nil, err
		}
		p.Shadow = svc.Name
		p.Cluster = clusterName(shadowPort, svc.Name+"."+svc.Namespace+".svc."+clusterDomain)
		in.Objects = append(in.Objects, svc)
		sl := endpointslice.ForService(svc, podsByApp[string(p.Pool.Spec.Selector.MatchLabels["app"])])
		if len(sl) != 1 || len(sl[0].Endpoints) != podsPerPool {
			return nil, fmt.Errorf("pool %s: %d slices, want one of %d endpoints", name, len(sl), podsPerPool)
		}
		p.Slice = sl[0]
		in.Objects = append(in.Objects, sl[0])
		in.Pool = append(in.Pool, *p)
	}
	if len(in.Pool) != pools {
		return nil, fmt.Errorf("%d pools in the folder, want %d", len(in.Pool), pools)
	}
	if len(in.GatewayNames) != gateways {
		return nil, fmt.Errorf("%d Gateways in the folder, want %d", len(in.GatewayNames), gateways)
	}
	for _, svc := range services {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		in.Objects = append(in.Objects, endpointsOf(svc, podsByApp)...)
	}
	for i, gw := range in.GatewayNames {
		in.Objects = append(in.Objects, gatewayDeployment(gw, i)...)
	}
	return in, nil
}

// gatewayDeployment is what both control planes' deployment controllers
// run for Gateway gw of class "istio" in a cluster, reduced to what a
// control plane reads: the Service "<gw>-istio" (both sides' name) that
// selects the proxy by the gateway-name label, one ready proxy Pod with
// the IP its ADS client's node id carries (proxyNode), and the Service's
// EndpointSlice. Istio finds a Gateway's proxies through that Service
// (the converted Gateway names it); ours maps a proxy by its node
// metadata and reads none of these.
func gatewayDeployment(gw string, index int) []runtime.Object {
	labels := map[string]string{gatewayNameLabel: gw}
	pod := &corev1.Pod{
		TypeMeta:   typeMeta("v1", "Pod"),
		ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: gw + "-proxy", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "envoy", Image: "envoy",
			Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {Name: "status-port", ContainerPort: 15021, Protocol: corev1.ProtocolTCP}},
		}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: proxyIP(index), PodIPs: []corev1.PodIP{{IP: proxyIP(index)}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: gw + "-" + className, Labels: labels},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: labels,
			Ports: []corev1.ServicePort{
				{Name: "status-port", Port: 15021, TargetPort: intstr.FromInt32(15021), Protocol: corev1.ProtocolTCP},
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	out := []runtime.Object{pod, svc}
	for _, s := range endpointslice.ForService(svc, []*corev1.Pod{pod}) {
		out = append(out, s)
	}
	return out
}

// acceptedStatus is the status the leader of either control plane writes
// on a route its Gateway accepts with every reference resolved. Istio
// derives a pool's Gateways (and so whether a Gateway's listener gets the
// ext_proc filter) from these parents; ours from the routes' specs. A
// cluster that has settled holds it, so both sides start from it.
func acceptedStatus(r *gwv1.HTTPRoute) gwv1.HTTPRouteStatus {
	var st gwv1.HTTPRouteStatus
	for _, ref := range r.Spec.ParentRefs {
		ref := *ref.DeepCopy()
		if ref.Group == nil {
			ref.Group = ptr.To(gwv1.Group(gwv1.GroupName))
		}
		if ref.Kind == nil {
			ref.Kind = ptr.To(gwv1.Kind("Gateway"))
		}
		cond := func(t, reason string) metav1.Condition {
			return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: r.Generation}
		}
		st.Parents = append(st.Parents, gwv1.RouteParentStatus{
			ParentRef:      ref,
			ControllerName: controllerName,
			Conditions:     []metav1.Condition{cond("Accepted", "Accepted"), cond("ResolvedRefs", "ResolvedRefs")},
		})
	}
	return st
}

// proxyIP is the address of Gateway number index's proxy.
func proxyIP(index int) string { return fmt.Sprintf("10.250.%d.%d", index/250, index%250+1) }

func endpointsOf(svc *corev1.Service, podsByApp map[string][]*corev1.Pod) []runtime.Object {
	var out []runtime.Object
	for _, s := range endpointslice.ForService(svc, podsByApp[svc.Spec.Selector["app"]]) {
		out = append(out, s)
	}
	return out
}

func poolEntry(m map[string]*Pool, name string) *Pool {
	p := m[name]
	if p == nil {
		p = &Pool{Name: name}
		m[name] = p
	}
	return p
}

// shadowService is the pool's shadow Service as the control planes apply it
// (gateway.ShadowService; Istio writes the same object), with the type the
// API server defaults.
func shadowService(pool *inferencev1.InferencePool) (*corev1.Service, error) {
	data, err := json.Marshal(gateway.ShadowService(pool))
	if err != nil {
		return nil, err
	}
	svc := &corev1.Service{}
	if err := json.Unmarshal(data, svc); err != nil {
		return nil, err
	}
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	return svc, nil
}

// PoolsOf returns the pools routed through Gateway gw.
func (in *Inputs) PoolsOf(gw string) []Pool {
	var out []Pool
	for _, p := range in.Pool {
		if p.Gateway == gw {
			out = append(out, p)
		}
	}
	return out
}

// WithoutEPP returns a copy of in whose InferencePool pool has no
// endpointPickerRef: the fairness check's deliberate difference.
func (in *Inputs) WithoutEPP(pool string) (*Inputs, error) {
	out := *in
	out.Objects = slices.Clone(in.Objects)
	for i, o := range out.Objects {
		if p, ok := o.(*inferencev1.InferencePool); ok && p.Name == pool {
			p = p.DeepCopy()
			p.Spec.EndpointPickerRef = nil
			out.Objects[i] = p
			return &out, nil
		}
	}
	return nil, fmt.Errorf("no InferencePool %s", pool)
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func objectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
