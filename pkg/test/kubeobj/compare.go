// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeobj

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// serverSet are the metadata fields the API server writes on its own: they
// differ between two installs of the same objects.
var serverSet = []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}

// Ignore names labels and annotations that Diff leaves out, such as those an
// installer adds to every object it owns (helm's meta.helm.sh/release-name).
type Ignore struct {
	Labels      []string
	Annotations []string
}

// Comparable is a copy of u without status, the server-set metadata fields,
// a Service's allocated cluster IPs, and the labels and annotations of ign;
// empty label and annotation maps are dropped.
func Comparable(u *unstructured.Unstructured, ign Ignore) map[string]any {
	c := u.DeepCopy()
	delete(c.Object, "status")
	for _, f := range serverSet {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	if c.GetAPIVersion() == "v1" && c.GetKind() == "Service" {
		unstructured.RemoveNestedField(c.Object, "spec", "clusterIP")
		unstructured.RemoveNestedField(c.Object, "spec", "clusterIPs")
	}
	for _, l := range ign.Labels {
		unstructured.RemoveNestedField(c.Object, "metadata", "labels", l)
	}
	for _, a := range ign.Annotations {
		unstructured.RemoveNestedField(c.Object, "metadata", "annotations", a)
	}
	for _, f := range []string{"labels", "annotations"} {
		if m, ok, _ := unstructured.NestedMap(c.Object, "metadata", f); ok && len(m) == 0 {
			unstructured.RemoveNestedField(c.Object, "metadata", f)
		}
	}
	return c.Object
}

// Diff compares two lists of live objects pairwise, in order, field by field
// (Comparable), and returns one go-cmp diff per pair that differs (-want
// +got), or "" when all are equal. Lists of different lengths differ.
func Diff(want, got []*unstructured.Unstructured, ign Ignore) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d objects, want %d", len(got), len(want))
	}
	var out string
	for i := range want {
		if d := cmp.Diff(Comparable(want[i], ign), Comparable(got[i], ign)); d != "" {
			out += fmt.Sprintf("%s %s/%s (-want +got):\n%s", want[i].GetKind(), want[i].GetNamespace(), want[i].GetName(), d)
		}
	}
	return out
}
