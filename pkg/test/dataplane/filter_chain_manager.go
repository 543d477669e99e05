// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"strings"
)

// selectChain is Envoy's filter chain match on the server name sni ("" when
// the ClientHello has none): exact, then the longest wildcard suffix, then
// a chain without server_names; nil when none matches.
func selectChain(chains []*tlsChain, sni string) *tlsChain {
	var any *tlsChain
	for _, c := range chains {
		if len(c.serverNames) == 0 && any == nil {
			any = c
		}
		for _, n := range c.serverNames {
			if sni != "" && n == sni {
				return c
			}
		}
	}
	if sni != "" {
		for i := strings.IndexByte(sni, '.'); i >= 0; {
			wildcard := "*" + sni[i:]
			for _, c := range chains {
				for _, n := range c.serverNames {
					if n == wildcard {
						return c
					}
				}
			}
			next := strings.IndexByte(sni[i+1:], '.')
			if next < 0 {
				break
			}
			i += 1 + next
		}
	}
	return any
}
