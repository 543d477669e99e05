// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// encodedSpecDigest is specDigest as it was before withoutMetaAndStatus:
// the object's JSON with its top-level metadata and status keys dropped.
func encodedSpecDigest(v any) string {
	raw, _ := json.Marshal(v)
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(raw, &fields)
	delete(fields, "metadata")
	delete(fields, "status")
	out, _ := json.Marshal(fields)
	sum := sha256.Sum256(out)
	return string(sum[:])
}

// TestSpecDigestDecidesAsTheEncoding: two objects get the same specDigest
// exactly when their JSON without metadata and status is the same.
func TestSpecDigestDecidesAsTheEncoding(t *testing.T) {
	pod := func(edit func(*corev1.Pod)) any {
		p := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "a"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
		}
		if edit != nil {
			edit(p)
		}
		return p
	}
	svc := func(edit func(*corev1.Service)) any {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		if edit != nil {
			edit(s)
		}
		return s
	}
	route := func(edit func(*gatewayv1.HTTPRoute)) any {
		r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}}
		r.Spec.Hostnames = []gatewayv1.Hostname{"a.example.com"}
		if edit != nil {
			edit(r)
		}
		return r
	}
	values := []any{
		pod(nil),
		pod(func(p *corev1.Pod) { p.Labels["app"] = "b" }),
		pod(func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.2" }),
		pod(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "j" }),
		pod(func(p *corev1.Pod) { p.APIVersion = "" }),
		svc(nil),
		svc(func(s *corev1.Service) { s.Annotations = map[string]string{"x": "y"} }),
		svc(func(s *corev1.Service) { s.Spec.Ports[0].Port = 81 }),
		route(nil),
		route(func(r *gatewayv1.HTTPRoute) { r.Generation = 7 }),
		route(func(r *gatewayv1.HTTPRoute) { r.Spec.Hostnames = nil }),
		route(func(r *gatewayv1.HTTPRoute) { r.Status.Parents = []gatewayv1.RouteParentStatus{{ControllerName: "c"}} }),
	}
	for i, a := range values {
		for j, b := range values {
			if fmt.Sprintf("%T", a) != fmt.Sprintf("%T", b) {
				continue
			}
			want := encodedSpecDigest(a) == encodedSpecDigest(b)
			if got := specDigest(a) == specDigest(b); got != want {
				t.Errorf("values %d and %d: same specDigest %v, same encoding without metadata and status %v", i, j, got, want)
			}
		}
	}
	if _, ok := withoutMetaAndStatus(map[string]any{"metadata": 1}); ok {
		t.Error("withoutMetaAndStatus took a map")
	}
	if got, want := specDigest(map[string]any{"metadata": 1, "spec": 2}), specDigest(map[string]any{"metadata": 3, "spec": 2}); got != want {
		t.Error("a map's specDigest depends on its metadata")
	}
}

// TestStrictDecodeFromTheDocument: decoding the document's own JSON gives
// what decoding the re-encoded generic value gives, and on a rejected
// document the errors are the re-encoded value's.
func TestStrictDecodeFromTheDocument(t *testing.T) {
	for _, text := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: a}}\nspec:\n  containers: [{name: c, image: i, ports: [{containerPort: 8000}]}]\nstatus: {phase: Running, podIP: 10.0.0.1}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80, targetPort: 8080.0}], zzz: 1, aaa: 2}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {b: x, a: y}\nbogus: true\n",
	} {
		j, _, err := toJSON(document{body: []byte(text), line: 1})
		if err != nil {
			t.Fatal(err)
		}
		var u map[string]any
		if err := json.Unmarshal(j, &u); err != nil {
			t.Fatal(err)
		}
		fast, fastErr := strictDecode(u, j)
		slow, slowErr := strictDecode(u, nil)
		if fmt.Sprint(fastErr) != fmt.Sprint(slowErr) {
			t.Errorf("%q: errors differ:\nfrom the document: %v\nre-encoded: %v", text, fastErr, slowErr)
		}
		if diff := cmp.Diff(slow, fast); diff != "" {
			t.Errorf("%q: decoded objects differ (-re-encoded +document):\n%s", text, diff)
		}
	}
}

// TestConcurrentDecodeIsInOrder: a file's documents decoded on several
// goroutines give the objects and problems, in the order, of one goroutine.
func TestConcurrentDecodeIsInOrder(t *testing.T) {
	var ds []string
	for i := range 300 {
		switch i % 7 {
		case 3:
			ds = append(ds, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: bad-%d}\nspec: {nope: 1}\n", i))
		case 5:
			ds = append(ds, "a: [unterminated\n")
		default:
			ds = append(ds, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: p-%d, namespace: ns}\nspec: {containers: [{name: c, image: i}]}\n", i))
		}
	}
	data := []byte(strings.Join(ds, "---\n"))
	decode := func(procs int) *fileDecode {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		crds, err := embeddedCRDs()
		if err != nil {
			t.Fatal(err)
		}
		s := &Source{dec: &decoder{crds: crds}}
		return s.decodeFile("pods.yaml", data)
	}
	one, many := decode(1), decode(4)
	if len(one.objects) == 0 || len(one.problems) == 0 || !one.broken {
		t.Fatalf("the file should yield objects, problems and be broken: %d objects, %d problems, broken %v", len(one.objects), len(one.problems), one.broken)
	}
	keys := func(fd *fileDecode) []string {
		var out []string
		for _, o := range fd.objects {
			out = append(out, fmt.Sprintf("%s %d %s", o.key, o.ref.doc, o.digest))
		}
		return out
	}
	if diff := cmp.Diff(keys(one), keys(many)); diff != "" {
		t.Errorf("objects differ (-1 goroutine +4):\n%s", diff)
	}
	if diff := cmp.Diff(problemStrings(one.problems), problemStrings(many.problems)); diff != "" {
		t.Errorf("problems differ (-1 goroutine +4):\n%s", diff)
	}
	if diff := cmp.Diff(one.rejected, many.rejected, cmp.AllowUnexported(objectID{})); diff != "" {
		t.Errorf("rejected differ (-1 goroutine +4):\n%s", diff)
	}
}

func problemStrings(ps []Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Error()
	}
	return out
}
