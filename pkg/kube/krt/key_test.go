// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// ptrNamed has ResourceName on the pointer receiver only.
type ptrNamed struct{ ID string }

func (p *ptrNamed) ResourceName() string { return "ptr/" + p.ID }

// namedAndMeta has both a ResourceName and Kubernetes-style metadata; the
// ResourceName wins.
type namedAndMeta struct{ Name, Namespace string }

func (n namedAndMeta) ResourceName() string { return "rn:" + n.Name }
func (n namedAndMeta) GetName() string      { return n.Name }
func (n namedAndMeta) GetNamespace() string { return n.Namespace }

// metaOnly has Kubernetes-style metadata on value receivers.
type metaOnly struct{ Name, Namespace string }

func (m metaOnly) GetName() string      { return m.Name }
func (m metaOnly) GetNamespace() string { return m.Namespace }

func TestKeyFromResourceName(t *testing.T) {
	if got := krt.GetKey(pod{Name: "a", Namespace: "ns"}); got != "ns/a" {
		t.Errorf("GetKey(value receiver) = %q, want ns/a", got)
	}
	if got := krt.GetKey(ptrNamed{ID: "1"}); got != "ptr/1" {
		t.Errorf("GetKey(pointer receiver, value type) = %q, want ptr/1", got)
	}
	if got := krt.GetKey(&ptrNamed{ID: "2"}); got != "ptr/2" {
		t.Errorf("GetKey(pointer type) = %q, want ptr/2", got)
	}
	if got := krt.GetKey(namedAndMeta{Name: "x", Namespace: "ns"}); got != "rn:x" {
		t.Errorf("GetKey(ResourceName and metadata) = %q, want the ResourceName rn:x", got)
	}

	vals := krt.NewStaticCollection(nil, []ptrNamed{{ID: "2"}, {ID: "1"}})
	if diff := cmp.Diff([]ptrNamed{{ID: "1"}, {ID: "2"}}, vals.List()); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if got := vals.GetKey("ptr/2"); got == nil || got.ID != "2" {
		t.Errorf("GetKey(ptr/2) = %+v", got)
	}
	ptrs := krt.NewStaticCollection(nil, []*ptrNamed{{ID: "3"}})
	if got := ptrs.GetKey("ptr/3"); got == nil || (*got).ID != "3" {
		t.Errorf("GetKey(ptr/3) on a collection of pointers = %+v", got)
	}
}

func TestKeyFromKubernetesMetadata(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"}}
	if got := krt.GetKey(p); got != "prod/web" {
		t.Errorf("GetKey(*corev1.Pod) = %q, want prod/web", got)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}
	if got := krt.GetKey(ns); got != "prod" {
		t.Errorf("GetKey(*corev1.Namespace) = %q, want prod", got)
	}
	if got := krt.GetKey(metaOnly{Name: "n"}); got != "n" {
		t.Errorf("GetKey(cluster-scoped value type) = %q, want n", got)
	}
	if got := krt.GetKey(metaOnly{Name: "n", Namespace: "ns"}); got != "ns/n" {
		t.Errorf("GetKey(namespaced value type) = %q, want ns/n", got)
	}

	pods := krt.NewStaticCollection(nil, []*corev1.Pod{p})
	if got := pods.GetKey("prod/web"); got == nil || *got != p {
		t.Errorf("collection GetKey(prod/web) = %v, want the pod", got)
	}
	nss := krt.NewStaticCollection(nil, []*corev1.Namespace{ns})
	if diff := cmp.Diff([]string{"prod"}, keysOf(nss.List())); diff != "" {
		t.Errorf("namespace keys (-want +got):\n%s", diff)
	}
}

func TestKeylessTypePanicsNamingTheType(t *testing.T) {
	const typeName = "struct { X int }"
	cases := map[string]func(){
		"NewStaticCollection": func() { krt.NewStaticCollection[struct{ X int }](nil, nil) },
		"GetKey":              func() { krt.GetKey(struct{ X int }{X: 1}) },
		"NewCollection": func() {
			in := krt.NewStaticCollection[pod](nil, nil)
			krt.NewCollection(in, func(krt.HandlerContext, pod) *struct{ X int } { return nil })
		},
		"JoinCollection": func() { krt.JoinCollection[struct{ X int }](nil) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			msg := mustPanic(t, f)
			if !strings.Contains(msg, typeName) {
				t.Errorf("panic %q does not name the type %q", msg, typeName)
			}
		})
	}
}
