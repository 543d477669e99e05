// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package model

import "slices"

// GatewayServing is the feed back from the ADS server's push path
// (pilot/pkg/xds) to the controller's Gateway status
// (pilot/pkg/config/kube/gateway): what of one Gateway's translation is not
// served as translated. Only a Gateway with something refused has one; it
// is removed when the Gateway is served in full again, or deleted. Its krt
// key is "namespace/name".
type GatewayServing struct {
	Namespace, Name string
	// Refused is never empty, in the push path's order (deterministic).
	Refused []RefusedResource
}

// RefusedResource is one part of a Gateway's translation that was not
// served as translated.
type RefusedResource struct {
	// Type is "listener", "route configuration", "virtual host", "route"
	// (one route rule in one virtual host), "cluster", "cluster load
	// assignment" (core.Refusal), "translation" (the Gateway could not be
	// translated at all) or "gateway" (the whole set was refused).
	Type string `json:"type"`
	// Name names the part (core.Refusal.Name), or the Gateway for the last
	// two types.
	Name string `json:"name"`
	// LastGood is true when the last good version is served in its place,
	// false when nothing is.
	LastGood bool `json:"lastGood,omitempty"`
	// Error is why, cut to a bounded length.
	Error string `json:"error"`
}

// ResourceName is the krt key: namespace/name.
func (g GatewayServing) ResourceName() string { return g.Namespace + "/" + g.Name }

// Equals compares two values (krt emits no event for an equal one).
func (g GatewayServing) Equals(o GatewayServing) bool {
	return g.Namespace == o.Namespace && g.Name == o.Name && slices.Equal(g.Refused, o.Refused)
}
