// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// EnvoyVersionFloor is the oldest Envoy release that does everything our
// configuration asks: OverrideHost.selected_host_key (the override_host
// load balancer writing the endpoint it picked to envoy.lb
// x-gateway-destination-endpoint-served, which ext_proc then sends to the
// EPP) first shipped in Envoy 1.38.0 (envoyproxy/envoy pull request 43567,
// merged in February 2026; go-control-plane's envoy v1.37.0 API module does
// not have the field). An older Envoy ignores the unknown field with a
// warning (source/common/protobuf/utility.cc, checkForUnexpectedFields, and
// source/common/protobuf/message_validator_impl.cc,
// WarningValidationVisitorImpl::onUnknownField) unless it runs with
// --reject-unknown-dynamic-fields, and serves without reporting the served
// endpoint to the EPP.
var EnvoyVersionFloor = semver.Version{Major: 1, Minor: 38, Patch: 0}

// envoyUserAgent is the Node.user_agent_name Envoy sends unless its
// bootstrap sets another (source/server/server.cc,
// InstanceBase::initializeOrThrow).
const envoyUserAgent = "envoy"

// ParseVersion reads a release "1.38.2", with an optional leading "v" and
// an optional pre-release after "-" (as in "1.38.2-dev", which sorts before
// 1.38.2).
func ParseVersion(s string) (semver.Version, error) {
	v, err := semver.Parse(strings.TrimPrefix(s, "v"))
	if err != nil {
		return semver.Version{}, fmt.Errorf("version %q: %w", s, err)
	}
	return v, nil
}

// ProxyVersion is what a node says about the software behind it, and what
// the version floor makes of it.
type ProxyVersion struct {
	// UserAgent is Node.user_agent_name ("envoy" for Envoy).
	UserAgent string `json:"userAgent,omitempty"`
	// Version is Node.user_agent_build_version.version as MAJOR.MINOR.PATCH,
	// else Node.user_agent_version as sent; empty when the node sends
	// neither.
	Version string `json:"version,omitempty"`
	// BelowFloor is true for an Envoy older than EnvoyVersionFloor, or one
	// that sends no structured build version: it is served, but does not
	// report the endpoint it served to the EPP.
	BelowFloor bool `json:"belowVersionFloor,omitempty"`
}

// proxyVersionOf applies the version floor to a node. Only Envoys are held
// to it (user_agent_name "envoy", which our Gateway bootstrap leaves to
// Envoy's default): Envoy always sends user_agent_build_version
// (source/server/server.cc), so an Envoy without one is below the floor,
// as nothing shows it implements selected_host_key. Other clients (our
// proxy-config command, gRPC xDS clients, test clients that send no user
// agent) do not run override_host, so the floor does not apply to them;
// their version is shown as sent.
func proxyVersionOf(node *corev3.Node) ProxyVersion {
	pv := ProxyVersion{UserAgent: node.GetUserAgentName(), Version: node.GetUserAgentVersion()}
	sv := node.GetUserAgentBuildVersion().GetVersion()
	if sv != nil {
		pv.Version = semverOf(sv).String()
	}
	if pv.UserAgent == envoyUserAgent {
		pv.BelowFloor = sv == nil || semverOf(sv).LT(EnvoyVersionFloor)
	}
	return pv
}

func semverOf(v *typev3.SemanticVersion) semver.Version {
	return semver.Version{Major: uint64(v.GetMajorNumber()), Minor: uint64(v.GetMinorNumber()), Patch: uint64(v.GetPatch())}
}
