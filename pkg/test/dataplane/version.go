// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// DefaultEnvoyVersion is the Envoy release the data plane behaves as unless
// Options.EnvoyVersion says otherwise: the release whose API it is compiled
// against (go-control-plane's envoy v1.40.0 module) and whose image the
// Gateway Deployments run (PILOT_GATEWAY_PROXY_IMAGE).
const DefaultEnvoyVersion = "1.40.0"

// envoyVersion is an Envoy release, MAJOR.MINOR.PATCH.
type envoyVersion struct{ semver.Version }

func (v envoyVersion) less(o envoyVersion) bool { return v.LT(o.Version) }

func parseEnvoyVersion(s string) (envoyVersion, error) {
	v, err := semver.Parse(s)
	if err != nil {
		return envoyVersion{}, fmt.Errorf("envoy version %q: %w", s, err)
	}
	return envoyVersion{v}, nil
}

// fieldsIntroduced lists, for every field in allowedFields that not every
// Envoy has, the first release that has it. An older data plane does not
// know the field: it ignores it, as an older Envoy ignores an unknown field
// (see ignoreNewerFields). Checked against go-control-plane's envoy v1.37.0
// module: of allowedFields, it lacks only selected_host_key.
var fieldsIntroduced = map[protoreflect.FullName]envoyVersion{
	// envoyproxy/envoy pull request 43567 (February 2026), first in 1.38.0.
	"envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost.selected_host_key": {semver.MustParse("1.38.0")},
}

// withNodeID returns a copy of n with id set, as Envoy applies
// --service-node to the bootstrap's node (source/common/local_info/
// local_info_impl.h, buildLocalNode: a non-empty name replaces node.id).
func withNodeID(n *corev3.Node, id string) *corev3.Node {
	out := &corev3.Node{}
	if n != nil {
		out = proto.Clone(n).(*corev3.Node)
	}
	out.Id = id
	return out
}

// declaredNode is the node the data plane sends: the bootstrap's, with
// user_agent_name "envoy" and user_agent_build_version v unless the
// bootstrap sets them, as Envoy fills them (source/server/server.cc,
// InstanceBase::initializeOrThrow). The bootstrap's node is not modified.
func declaredNode(n *corev3.Node, v envoyVersion) *corev3.Node {
	out := &corev3.Node{}
	if n != nil {
		out = proto.Clone(n).(*corev3.Node)
	}
	if out.GetUserAgentName() == "" {
		out.UserAgentName = "envoy"
	}
	if out.GetUserAgentBuildVersion().GetVersion() == nil {
		out.UserAgentVersionType = &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
			Version: &typev3.SemanticVersion{MajorNumber: uint32(v.Major), MinorNumber: uint32(v.Minor), Patch: uint32(v.Patch)},
		}}
	}
	return out
}

// ignoreNewerFields clears, in m and in every message packed in an Any
// inside it, each set field this version does not have (fieldsIntroduced),
// and calls unknown once per message that had any, with Envoy's
// description of it. This is what an older Envoy does with a field newer
// than itself: the bytes parse as an unknown field, and
// MessageUtil::checkForUnexpectedFields (source/common/protobuf/utility.cc)
// reports "type <message>(<parents>) with unknown field set {<numbers>}" to
// the dynamic validation visitor, which only warns
// (WarningValidationVisitorImpl, message_validator_impl.cc) unless Envoy
// runs with --reject-unknown-dynamic-fields. An Any's message is unpacked
// on its own, so its parents are "root".
func (v envoyVersion) ignoreNewerFields(m proto.Message, unknown func(description string)) {
	v.clearNewer(m.ProtoReflect(), nil, unknown)
}

func (v envoyVersion) clearNewer(m protoreflect.Message, parents []string, unknown func(string)) bool {
	if a, ok := m.Interface().(*anypb.Any); ok {
		return v.clearNewerInAny(a, unknown)
	}
	var numbers []int
	var newer []protoreflect.FieldDescriptor
	changed := false
	inner := append(parents[:len(parents):len(parents)], string(m.Descriptor().FullName()))
	m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		if intro, ok := fieldsIntroduced[fd.FullName()]; ok && v.less(intro) {
			newer = append(newer, fd)
			numbers = append(numbers, int(fd.Number()))
			return true
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < val.List().Len(); i++ {
				changed = v.clearNewer(val.List().Get(i).Message(), inner, unknown) || changed
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			val.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				changed = v.clearNewer(mv.Message(), inner, unknown) || changed
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			changed = v.clearNewer(val.Message(), inner, unknown) || changed
		}
		return true
	})
	if len(newer) == 0 {
		return changed
	}
	for _, fd := range newer {
		m.Clear(fd)
	}
	sort.Ints(numbers)
	where := "root"
	if len(parents) > 0 {
		where = strings.Join(parents, "::")
	}
	nums := make([]string, len(numbers))
	for i, n := range numbers {
		nums[i] = strconv.Itoa(n)
	}
	unknown(fmt.Sprintf("type %s(%s) with unknown field set {%s}", m.Descriptor().FullName(), where, strings.Join(nums, ", ")))
	return true
}

// clearNewerInAny clears newer fields inside a's message and packs it again
// when anything was cleared. An Any the data plane cannot unpack is left to
// the honesty check, which refuses it.
func (v envoyVersion) clearNewerInAny(a *anypb.Any, unknown func(string)) bool {
	inner, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes})
	if err != nil {
		return false
	}
	if !v.clearNewer(inner.ProtoReflect(), nil, unknown) {
		return false
	}
	// Marshalling what was just unmarshalled cannot fail (invalid UTF-8,
	// the one cause, is refused by the unmarshal); the unchanged Any
	// stays if it ever did.
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
	if err != nil {
		return false
	}
	a.Value = b
	return true
}
