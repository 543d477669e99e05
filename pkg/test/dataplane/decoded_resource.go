// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// decoded is one received resource after validation and compilation.
type decoded struct {
	name  string
	value any // *listenerEntry, *routeEntry, *clusterEntry, *endpointEntry or *secretEntry
}

// decodeResource decodes a resource as the data plane at
// DefaultEnvoyVersion does (see decodeResourceAs).
func decodeResource(typeURL string, a *anypb.Any) (decoded, error) {
	return decodeResourceAs(typeURL, a, nil, defaultRegexEngine)
}

// Validate reports whether a data plane at DefaultEnvoyVersion, with
// Envoy's default RE2 program size limit, accepts the resource a (of a
// type it subscribes to, a's type URL), and why not: the error of its
// NACK. Nothing is applied.
func Validate(a *anypb.Any) error {
	_, err := decodeResource(a.GetTypeUrl(), a)
	return err
}

// decodeResourceAs unpacks a resource of type typeURL, drops the fields
// its Envoy version does not know (ignoreNewer, when set; Envoy does this
// while parsing, before validation), checks it the way Envoy would (proto
// validation rules), plus the data plane's honesty check (no set field it
// does not implement), then compiles it.
func decodeResourceAs(typeURL string, a *anypb.Any, ignoreNewer func(proto.Message), re regexEngine) (decoded, error) {
	if a.GetTypeUrl() != typeURL {
		return decoded{}, fmt.Errorf("resource of type %s in a %s response", a.GetTypeUrl(), typeURL)
	}
	msg, err := a.UnmarshalNew()
	if err != nil {
		return decoded{}, err
	}
	if ignoreNewer != nil {
		ignoreNewer(msg)
	}
	name := resourceName(msg)
	fail := func(err error) (decoded, error) { return decoded{}, fmt.Errorf("%s: %w", name, err) }
	if v, ok := msg.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return fail(err)
		}
	}
	if err := checkImplemented(msg); err != nil {
		return fail(err)
	}
	switch m := msg.(type) {
	case *listenerv3.Listener:
		cfg, err := compileListener(m, re)
		if err != nil {
			return fail(err)
		}
		return decoded{name, &listenerEntry{m, cfg}}, nil
	case *routev3.RouteConfiguration:
		t, err := compileRouteTable(m, re)
		if err != nil {
			return fail(err)
		}
		return decoded{name, &routeEntry{m, t}}, nil
	case *clusterv3.Cluster:
		cfg, err := compileCluster(m)
		if err != nil {
			return fail(err)
		}
		return decoded{name, &clusterEntry{m, cfg}}, nil
	case *endpointv3.ClusterLoadAssignment:
		addrs, err := endpointsOf(m)
		if err != nil {
			return fail(err)
		}
		return decoded{name, &endpointEntry{m, addrs}}, nil
	case *tlsv3.Secret:
		cert, err := compileSecret(m)
		if err != nil {
			return fail(err)
		}
		return decoded{name, &secretEntry{m, cert}}, nil
	}
	return decoded{}, fmt.Errorf("type %s not implemented", typeURL)
}

// decode decodes a resource as this data plane's Envoy version does: a
// field newer than it is ignored with a warning (ignoreNewerFields).
func (dp *DataPlane) decode(typeURL string, a *anypb.Any) (decoded, error) {
	d, err := decodeResourceAs(typeURL, a, func(m proto.Message) { dp.version.ignoreNewerFields(m, dp.unknownField) }, dp.target.regex)
	if err != nil {
		return d, err
	}
	return d, dp.target.static.checkNameFree(typeURL, d.name)
}

func resourceName(m proto.Message) string {
	switch r := m.(type) {
	case *endpointv3.ClusterLoadAssignment:
		return r.GetClusterName()
	case interface{ GetName() string }:
		return r.GetName()
	}
	return ""
}
