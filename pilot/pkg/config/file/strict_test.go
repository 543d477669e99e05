// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeStrictlyIsTheDeserializer: decodeStrictly succeeds exactly when
// strictDeserializer.Decode does, with the same object, over valid Pods,
// Services and ConfigMaps and ones the deserializer refuses (unknown,
// duplicate and case-variant fields, wrong types, a missing version).
func TestDecodeStrictlyIsTheDeserializer(t *testing.T) {
	for _, text := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"a"}},"spec":{"containers":[{"name":"c","ports":[{"containerPort":8000}]}]},"status":{"phase":"Running","podIP":"10.0.0.1"}}`,
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":"http"}]}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"}}`,
		`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"e"},"addressType":"IPv4","endpoints":[]}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"nope":1}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","name":"q"}}`,
		`{"apiVersion":"v1","kind":"Pod","APIVersion":"apps/v1","metadata":{"name":"p"}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"Name":"p"}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":5}}`,
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":"80"}]}}`,
		`{"apiVersion":"/","kind":"Pod"}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}} trailing`,
	} {
		var u map[string]any
		if err := json.Unmarshal([]byte(text), &u); err != nil {
			u = map[string]any{"apiVersion": "v1", "kind": "Pod"}
		}
		got, ok := decodeStrictly(u, []byte(text))
		want, _, err := strictDeserializer.Decode([]byte(text), nil, nil)
		if ok != (err == nil) {
			t.Errorf("%s: decodeStrictly ok %v, the deserializer's error %v", text, ok, err)
			continue
		}
		if ok {
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s: objects differ (-deserializer +decodeStrictly):\n%s", text, d)
			}
		}
	}
}
