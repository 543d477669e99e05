// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package adsclient

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// decode unpacks each Any as a T; an Any of another type is an error.
func decode[T any, PT interface {
	*T
	proto.Message
}](as []*anypb.Any) ([]PT, error) {
	out := make([]PT, 0, len(as))
	for _, a := range as {
		m := PT(new(T))
		if err := a.UnmarshalTo(m); err != nil {
			return nil, fmt.Errorf("resource of type %s: %w", a.GetTypeUrl(), err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Clusters unpacks CDS resources.
func Clusters(as []*anypb.Any) ([]*clusterv3.Cluster, error) { return decode[clusterv3.Cluster](as) }

// Listeners unpacks LDS resources.
func Listeners(as []*anypb.Any) ([]*listenerv3.Listener, error) {
	return decode[listenerv3.Listener](as)
}

// Assignments unpacks EDS resources (ClusterLoadAssignments).
func Assignments(as []*anypb.Any) ([]*endpointv3.ClusterLoadAssignment, error) {
	return decode[endpointv3.ClusterLoadAssignment](as)
}

// RouteConfigurations unpacks RDS resources.
func RouteConfigurations(as []*anypb.Any) ([]*routev3.RouteConfiguration, error) {
	return decode[routev3.RouteConfiguration](as)
}

// Secrets unpacks SDS resources.
func Secrets(as []*anypb.Any) ([]*tlsv3.Secret, error) { return decode[tlsv3.Secret](as) }

// Resources lists a delta response's resources as Anys, in order, for the
// typed helpers.
func Resources(r *discoveryv3.DeltaDiscoveryResponse) []*anypb.Any {
	out := make([]*anypb.Any, 0, len(r.GetResources()))
	for _, res := range r.GetResources() {
		out = append(out, res.GetResource())
	}
	return out
}

// Addresses lists an assignment's endpoints as address:port, sorted.
func Addresses(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))))
		}
	}
	slices.Sort(out)
	return out
}

// Validate runs ValidateAll (protoc-gen-validate's rules, as Envoy applies
// them) on m and, recursively, on every message packed in an Any inside
// it: a typed_config is checked as Envoy checks it once unpacked.
func Validate(m proto.Message) error {
	var errs []error
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, err)
		}
	}
	var walk func(protoreflect.Message)
	walk = func(r protoreflect.Message) {
		if a, ok := r.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if err := Validate(inner); err != nil {
				errs = append(errs, err)
			}
			return
		}
		r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message())
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(v.Message())
			}
			return true
		})
	}
	walk(m.ProtoReflect())
	return errors.Join(errs...)
}
