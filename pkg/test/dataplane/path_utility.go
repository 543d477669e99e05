// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"strings"
)

// errPathNotModelled is a path this data plane cannot normalize the way
// Envoy would; the request gets a 400 instead (stricter than Envoy, so the
// doubt shows as a failure).
var errPathNotModelled = errors.New("path normalization of this path is not modelled")

// normalizePath is the connection manager's normalize_path
// (ConnectionManagerUtility::maybeNormalizePath, then
// PathUtil::canonicalPath in source/common/http/path_utility.cc): the path
// before '?' goes through googleurl's url::CanonicalizePath and the query
// is kept as it is; a path the canonicalizer refuses is a 400
// (path_normalization_failed). Envoy does this before route selection, so
// routes match, and the upstream receives, the normalized path.
//
// Modelled: dot segments ("." and "..", also written %2e / %2E) are removed
// as RFC 3986 section 5.2.4 does, ".." never climbing above the root; a
// last "." or ".." segment leaves the trailing slash. Other percent escapes
// pass unchanged.
//
// Not modelled, and refused (errPathNotModelled) rather than guessed:
// characters googleurl escapes or rejects (controls, space, non-ASCII,
// `"`, `<`, `>`, backslash, '`', '{', '}', '|', '^'), and escapes of
// unreserved characters other than '.' (googleurl versions differ on
// whether %41 becomes "A").
func normalizePath(p string) (string, error) {
	path, query, hasQuery := strings.Cut(p, "?")
	if !strings.HasPrefix(path, "/") {
		return "", errPathNotModelled
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"<>\\`{}|^", c) >= 0 {
			return "", errPathNotModelled
		}
		if c == '%' {
			d, ok := unhex(path, i)
			if !ok {
				return "", errPathNotModelled // a lone '%': googleurl escapes it
			}
			if d != '.' && isUnreserved(d) {
				return "", errPathNotModelled
			}
		}
	}
	segs := strings.Split(path[1:], "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch dots(s) {
		case 1:
			if last {
				out = append(out, "")
			}
		case 2:
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	norm := "/" + strings.Join(out, "/")
	if hasQuery {
		norm += "?" + query
	}
	return norm, nil
}

// dots is 1 for a "." segment, 2 for "..", else 0, with %2e counted as a
// dot as googleurl's IsDot does.
func dots(seg string) int {
	n := 0
	for len(seg) > 0 {
		switch {
		case seg[0] == '.':
			seg = seg[1:]
		case len(seg) >= 3 && seg[0] == '%' && seg[1] == '2' && (seg[2] == 'e' || seg[2] == 'E'):
			seg = seg[3:]
		default:
			return 0
		}
		n++
		if n > 2 {
			return 0
		}
	}
	return n
}

func unhex(s string, i int) (byte, bool) {
	if i+2 >= len(s) {
		return 0, false
	}
	h, ok1 := hexVal(s[i+1])
	l, ok2 := hexVal(s[i+2])
	return h<<4 | l, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// isUnreserved is RFC 3986's unreserved set.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
}
