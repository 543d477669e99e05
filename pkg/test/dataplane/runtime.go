// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/infermesh/infermesh/pkg/re2size"
)

// runtimeValues are the bootstrap's layered_runtime flattened as Envoy's
// runtime loader does (source/common/runtime/runtime_impl.cc): each static
// layer's struct walked into dotted keys (ProtoLayer::walkProtoValue; a
// list or null value is invalid; a struct that is empty or has numerator
// or denominator is one entry), later layers replacing earlier keys
// (SnapshotImpl). An admin layer holds nothing at start; disk and RTDS
// layers are not implemented. Keys the data plane does not use are
// ignored, as Envoy ignores keys no code reads.
func runtimeValues(lr *bootstrapv3.LayeredRuntime) (map[string]*structpb.Value, error) {
	out := map[string]*structpb.Value{}
	names := map[string]bool{}
	for _, l := range lr.GetLayers() {
		if names[l.GetName()] {
			return nil, fmt.Errorf("bootstrap: Duplicate layer name: %s", l.GetName())
		}
		names[l.GetName()] = true
		switch {
		case l.GetStaticLayer() != nil:
			for k, v := range l.GetStaticLayer().GetFields() {
				if err := walkRuntime(k, v, out); err != nil {
					return nil, err
				}
			}
		case l.GetAdminLayer() != nil:
		default:
			return nil, fmt.Errorf("bootstrap: layered_runtime layer %q: disk and RTDS layers not implemented", l.GetName())
		}
	}
	return out, nil
}

func walkRuntime(key string, v *structpb.Value, out map[string]*structpb.Value) error {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		f := k.StructValue.GetFields()
		if _, num := f["numerator"]; len(f) == 0 || num || f["denominator"] != nil {
			out[key] = v
			return nil
		}
		for sub, sv := range f {
			if err := walkRuntime(key+"."+sub, sv, out); err != nil {
				return err
			}
		}
		return nil
	case *structpb.Value_StringValue, *structpb.Value_NumberValue, *structpb.Value_BoolValue:
		out[key] = v
		return nil
	}
	return fmt.Errorf("bootstrap: Invalid runtime entry value for %s", key)
}

// re2MaxProgramSize is re2.max_program_size.error_level as Envoy reads it:
// an entry that parses as a non-negative number (a string, or a number
// Envoy renders as YAML) sets it, floored (SnapshotImpl::resolveEntryType);
// "true" and "false" are booleans and leave Envoy's default, 100
// (runtime_features.cc). Envoy stores the value in 32 bits without a
// check; a larger value is refused here as not implemented.
func re2MaxProgramSize(values map[string]*structpb.Value) (uint32, error) {
	v, ok := values[re2size.RuntimeKey]
	if !ok {
		return re2size.EnvoyDefaultMax, nil
	}
	var s string
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		s = strings.TrimSpace(k.StringValue)
	case *structpb.Value_NumberValue:
		s = strconv.FormatFloat(k.NumberValue, 'f', -1, 64)
	default:
		return re2size.EnvoyDefaultMax, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return re2size.EnvoyDefaultMax, nil
	}
	if f > math.MaxUint32 {
		return 0, errors.New("bootstrap: " + re2size.RuntimeKey + " above 4294967295 not implemented (Envoy truncates it to 32 bits)")
	}
	return uint32(f), nil
}
