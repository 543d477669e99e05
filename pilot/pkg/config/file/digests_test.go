// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"crypto/sha256"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"
)

// TestObjectDigestsDecideAsBefore: for every pair of built-in objects,
// objectDigests' digests are equal exactly when digestOf's are, and its
// spec digests exactly when specDigest's are. The objects: randomly filled
// Pods, Services, ConfigMaps, Namespaces and EndpointSlices, each also
// with one field edited in metadata, spec or status, and copies.
func TestObjectDigestsDecideAsBefore(t *testing.T) {
	f := randfill.NewWithSeed(5).NilChance(0.3).NumElements(0, 2)
	var objs []runtime.Object
	for i := range 40 {
		var o runtime.Object
		switch i % 5 {
		case 0:
			o = &corev1.Pod{}
		case 1:
			o = &corev1.Service{}
		case 2:
			o = &corev1.ConfigMap{}
		case 3:
			o = &corev1.Namespace{}
		case 4:
			o = &discoveryv1.EndpointSlice{}
		}
		f.Fill(o)
		objs = append(objs, o, o.DeepCopyObject())
		edit := func(e func(runtime.Object)) {
			c := o.DeepCopyObject()
			e(c)
			objs = append(objs, c)
		}
		edit(func(c runtime.Object) { c.(metav1.Object).SetName(c.(metav1.Object).GetName() + "x") })
		edit(func(c runtime.Object) { c.(metav1.Object).SetLabels(map[string]string{"edited": "yes"}) })
		switch o.(type) {
		case *corev1.Pod:
			edit(func(o runtime.Object) { o.(*corev1.Pod).Spec.NodeName += "x" })
			edit(func(o runtime.Object) { o.(*corev1.Pod).Status.PodIP += "x" })
		case *corev1.Service:
			edit(func(o runtime.Object) { o.(*corev1.Service).Spec.ClusterIP += "x" })
			edit(func(o runtime.Object) { o.(*corev1.Service).Status = corev1.ServiceStatus{} })
		case *corev1.ConfigMap:
			edit(func(o runtime.Object) { o.(*corev1.ConfigMap).Data = map[string]string{"k": "v"} })
		case *corev1.Namespace:
			edit(func(o runtime.Object) { o.(*corev1.Namespace).Status.Phase += "x" })
		case *discoveryv1.EndpointSlice:
			edit(func(o runtime.Object) { o.(*discoveryv1.EndpointSlice).AddressType += "x" })
		}
	}
	type digests struct{ digest, spec, oldDigest, oldSpec string }
	ds := make([]digests, len(objs))
	for i, o := range objs {
		d, s := objectDigests(o)
		ds[i] = digests{d, s, digestOf(o), specDigest(o)}
	}
	for i := range objs {
		for j := range objs {
			a, b := ds[i], ds[j]
			if (a.digest == b.digest) != (a.oldDigest == b.oldDigest) {
				t.Fatalf("objects %d (%T) and %d (%T): digests equal %v, digestOf equal %v", i, objs[i], j, objs[j], a.digest == b.digest, a.oldDigest == b.oldDigest)
			}
			if a.spec != b.spec && a.oldSpec == b.oldSpec || a.spec == b.spec && a.oldSpec != b.oldSpec {
				t.Fatalf("objects %d (%T) and %d (%T): spec digests equal %v, specDigest equal %v", i, objs[i], j, objs[j], a.spec == b.spec, a.oldSpec == b.oldSpec)
			}
			if a.spec != a.oldSpec {
				t.Fatalf("object %d (%T): objectDigests' spec digest is not specDigest", i, objs[i])
			}
		}
	}
}

// TestStableUIDText: stableUID is the digest of fmt's %+v text of the
// identity, as it always was (a Pod's or shadow Service owner's uid must not
// change between versions).
func TestStableUIDText(t *testing.T) {
	for _, id := range []objectID{
		{},
		{kind: "Pod", namespace: "llm-namespace", name: "pool-0001-3"},
		{group: "inference.networking.k8s.io", kind: "InferencePool", namespace: "ns", name: "p"},
		{group: "gateway.networking.k8s.io", kind: "GatewayClass", name: "c"},
		{group: "g}", kind: " kind:", namespace: "{", name: "name:x y"},
	} {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%+v", id)))
		want := fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
		if got := string(stableUID(id)); got != want {
			t.Errorf("%+v: uid %s, want %s", id, got, want)
		}
	}
}
