// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	udpaannotations "github.com/cncf/xds/go/udpa/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// redactedText replaces a sensitive string or bytes field, as Envoy's admin
// writes it.
const redactedText = "[redacted]"

// Redact removes secret material from m in place, as Envoy's admin does
// before it prints /config_dump (MessageUtil::redact,
// source/common/protobuf/utility.cc): a field annotated
// (udpa.annotations.sensitive), such as TlsCertificate.private_key, and
// everything under it, has each string and bytes value replaced by
// "[redacted]" and every other scalar cleared; a map keeps its keys and
// only its values are redacted; an Any is unpacked by its type URL,
// redacted and packed again (one whose type is unknown is left as it is,
// as Envoy leaves it). m must be a message this process may modify.
func Redact(m proto.Message) {
	redactMessage(m.ProtoReflect(), false)
}

func redactMessage(m protoreflect.Message, sensitive bool) {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return
		}
		redactMessage(inner.ProtoReflect(), sensitive)
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
		if err != nil {
			return
		}
		a.Value = b
		return
	}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		s := sensitive || proto.GetExtension(fd.Options(), udpaannotations.E_Sensitive).(bool)
		if !m.Has(fd) {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			vd := fd.MapValue()
			mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				switch {
				case vd.Message() != nil:
					redactMessage(v.Message(), s)
				case s && vd.Kind() == protoreflect.StringKind:
					mp.Set(k, protoreflect.ValueOfString(redactedText))
				case s && vd.Kind() == protoreflect.BytesKind:
					mp.Set(k, protoreflect.ValueOfBytes([]byte(redactedText)))
				case s:
					mp.Clear(k)
				}
				return true
			})
		case fd.Message() != nil && fd.IsList():
			l := m.Get(fd).List()
			for j := 0; j < l.Len(); j++ {
				redactMessage(l.Get(j).Message(), s)
			}
		case fd.Message() != nil:
			redactMessage(m.Mutable(fd).Message(), s)
		case !s:
		case fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind:
			text := protoreflect.ValueOfString(redactedText)
			if fd.Kind() == protoreflect.BytesKind {
				text = protoreflect.ValueOfBytes([]byte(redactedText))
			}
			if fd.IsList() {
				l := m.Mutable(fd).List()
				for j := 0; j < l.Len(); j++ {
					l.Set(j, text)
				}
			} else {
				m.Set(fd, text)
			}
		default:
			m.Clear(fd)
		}
	}
}
