// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// GroupKind names a kind in an API group; "" is the core group.
type GroupKind struct{ Group, Kind string }

// ReferenceGrantAllows reports whether one of grants (the ReferenceGrants
// in the target's namespace) permits a reference from a from object in
// namespace fromNamespace to the to object called name (Gateway API
// ReferenceGrant, v1): some grant lists from (group, kind, namespace)
// in spec.from and to (group, kind, and name when set) in spec.to. Grants in
// other namespaces are ignored.
func ReferenceGrantAllows(grants []*gwv1.ReferenceGrant, targetNamespace string,
	from GroupKind, fromNamespace string, to GroupKind, name string,
) bool {
	for _, g := range grants {
		if g == nil || g.Namespace != targetNamespace {
			continue
		}
		fromOK := false
		for _, f := range g.Spec.From {
			if string(f.Group) == from.Group && string(f.Kind) == from.Kind && string(f.Namespace) == fromNamespace {
				fromOK = true
				break
			}
		}
		if !fromOK {
			continue
		}
		for _, t := range g.Spec.To {
			if string(t.Group) == to.Group && string(t.Kind) == to.Kind && (t.Name == nil || string(*t.Name) == name) {
				return true
			}
		}
	}
	return false
}
