// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package writer

import (
	"reflect"
	"strings"
)

// Desired is one object we own, as we want it: its namespace, name and the
// server-side apply configuration (for example
// *corev1ac.ServiceApplyConfiguration) carrying our ownership label. It is the
// element type of an OwnedWriter's desired collection; its key is
// "namespace/name".
type Desired[AC any] struct {
	Namespace, Name string
	Apply           AC
}

// ResourceName is the krt key: namespace/name.
func (d Desired[AC]) ResourceName() string { return d.Namespace + "/" + d.Name }

// Equals compares namespace, name and the apply configuration by value.
func (d Desired[AC]) Equals(o Desired[AC]) bool {
	return d.Namespace == o.Namespace && d.Name == o.Name && reflect.DeepEqual(d.Apply, o.Apply)
}

// DesiredStatus is our entries (those with our controllerName) of the
// status.parents list of one shared object. Its key is "namespace/name".
type DesiredStatus[P any] struct {
	Namespace, Name string
	Parents         []P
}

// ResourceName is the krt key: namespace/name.
func (d DesiredStatus[P]) ResourceName() string { return d.Namespace + "/" + d.Name }

// Equals compares namespace, name and the entries by value.
func (d DesiredStatus[P]) Equals(o DesiredStatus[P]) bool {
	return d.Namespace == o.Namespace && d.Name == o.Name && reflect.DeepEqual(d.Parents, o.Parents)
}

// splitKey splits "namespace/name".
func splitKey(key string) (namespace, name string) {
	if ns, n, ok := strings.Cut(key, "/"); ok {
		return ns, n
	}
	return "", key
}
