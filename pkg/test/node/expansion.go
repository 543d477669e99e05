// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import "strings"

// expand replaces each $(NAME) in input with lookup(NAME), as the kubelet
// expands env values, command and args (k8s.io/kubernetes
// third_party/forked/golang/expansion): a reference lookup does not know is
// left as written, "$$" is an escaped "$", and any other "$" (including an
// unclosed "$(") is kept.
func expand(input string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(input); i++ {
		if input[i] != '$' || i+1 >= len(input) {
			b.WriteByte(input[i])
			continue
		}
		switch next := input[i+1]; next {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(input[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := input[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
			b.WriteByte(next)
			i++
		}
	}
	return b.String()
}

// lookupIn returns a lookup over maps, the first map that has a name winning.
func lookupIn(maps ...map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, m := range maps {
			if v, ok := m[name]; ok {
				return v, true
			}
		}
		return "", false
	}
}

// expandAll expands each of in; nil stays nil.
func expandAll(in []string, lookup func(string) (string, bool)) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, lookup)
	}
	return out
}
