// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestGenericJSON: genericJSON writes what json.Marshal writes, byte for
// byte, for generated generic values (strings that need escaping, HTML
// characters, non-ASCII and invalid UTF-8, nested maps and slices, nil
// ones, floats that make it fall back to json.Marshal).
func TestGenericJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for range 3000 {
		v := genGeneric(r, 3)
		got, err := genericJSON(v)
		want, wantErr := json.Marshal(v)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%#v:\ngenericJSON: %s (%v)\njson.Marshal: %s (%v)", v, got, err, want, wantErr)
		}
	}
}

var genericStrings = []string{
	"", "a", "pool-0001", "with space", `quote"d`, `back\slash`, "<tag>", "a&b", "tab\there", "new\nline",
	"\x00\x01\x1f", "\x7f", "é日本", "\u2028\u2029", "\xff\xfe invalid", "emoji 🙂",
}

func genGeneric(r *rand.Rand, depth int) any {
	switch k := r.IntN(10); {
	case depth > 0 && k == 0:
		m := map[string]any{}
		for range r.IntN(4) {
			m[genericStrings[r.IntN(len(genericStrings))]] = genGeneric(r, depth-1)
		}
		if r.IntN(8) == 0 {
			m = nil
		}
		return m
	case depth > 0 && k == 1:
		s := make([]any, r.IntN(4))
		for i := range s {
			s[i] = genGeneric(r, depth-1)
		}
		if r.IntN(8) == 0 {
			s = nil
		}
		return s
	case k == 2:
		return nil
	case k == 3:
		return r.IntN(2) == 0
	case k == 4:
		return r.Int64() - r.Int64()
	case k == 5 && r.IntN(10) == 0:
		return r.Float64() * 1e6
	}
	return genericStrings[r.IntN(len(genericStrings))]
}
