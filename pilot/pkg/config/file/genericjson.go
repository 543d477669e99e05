// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"encoding/json"
	"slices"
	"strconv"
)

// genericJSON is json.Marshal(v) for a generic value of the kinds a
// document decodes to without floats (map[string]any, []any, string,
// int64, bool, nil), byte for byte: keys sorted, strings escaped as
// encoding/json escapes them. encoding/json reaches the same text through
// reflection and a sorted copy of every map's keys, which at 100,000 Pods
// is a noticeable part of start-up, hence this writer (TestGenericJSON
// compares it with json.Marshal). Any other kind (a float64 from a List's
// items) makes it fall back to json.Marshal.
func genericJSON(v any) ([]byte, error) {
	if b, ok := appendGeneric(make([]byte, 0, 512), v); ok {
		return b, nil
	}
	return json.Marshal(v)
}

func appendGeneric(buf []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(buf, "null"...), true
	case bool:
		return strconv.AppendBool(buf, v), true
	case int64:
		return strconv.AppendInt(buf, v, 10), true
	case string:
		return appendJSONString(buf, v), true
	case []any:
		if v == nil {
			return append(buf, "null"...), true
		}
		buf = append(buf, '[')
		for i, e := range v {
			if i > 0 {
				buf = append(buf, ',')
			}
			var ok bool
			if buf, ok = appendGeneric(buf, e); !ok {
				return buf, false
			}
		}
		return append(buf, ']'), true
	case map[string]any:
		if v == nil {
			return append(buf, "null"...), true
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, k)
			buf = append(buf, ':')
			var ok bool
			if buf, ok = appendGeneric(buf, v[k]); !ok {
				return buf, false
			}
		}
		return append(buf, '}'), true
	}
	return buf, false
}

// appendJSONString appends s as encoding/json writes it: as it is when every
// byte is printable ASCII that needs no escape (encoding/json escapes ", \
// and, for HTML, <, > and &), else by encoding/json itself.
func appendJSONString(buf []byte, s string) []byte {
	for i := range len(s) {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
