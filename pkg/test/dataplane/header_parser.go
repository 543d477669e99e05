// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// headerParserSource is the Envoy file this one follows.
const headerParserSource = "source/common/router/header_parser.cc"

// headerMutation is a compiled headers_to_add / headers_to_remove pair of
// one level (route, weighted cluster entry), Envoy's Router::HeaderParser.
type headerMutation struct {
	remove []string
	add    []headerAdd
}

type headerAdd struct {
	key string
	// value is the header value's substitution format string, formatted
	// (every piece is literal: see parseFormat).
	value  string
	action corev3.HeaderValueOption_HeaderAppendAction
}

// compileHeaderMutation is HeaderParser::configure. As in Envoy, a
// ':'-prefixed or host name (any case) may be neither added nor removed
// (Http::HeaderUtility::isModifiableHeader / isRemovableHeader), and every
// value must parse as a substitution format string; either error rejects
// the route configuration (an *InvalidConfigError, Envoy's message).
func compileHeaderMutation(add []*corev3.HeaderValueOption, remove []string) (headerMutation, error) {
	var hm headerMutation
	for _, o := range add {
		k := o.GetHeader().GetKey()
		if reservedHeader(k) {
			return hm, &InvalidConfigError{Source: headerParserSource, Reason: ":-prefixed or host headers may not be modified", At: k}
		}
		v, err := parseFormat(o.GetHeader().GetValue())
		if err != nil {
			return hm, err
		}
		hm.add = append(hm.add, headerAdd{key: k, value: v, action: o.GetAppendAction()})
	}
	for _, r := range remove {
		if reservedHeader(r) {
			return hm, &InvalidConfigError{Source: headerParserSource, Reason: ":-prefixed or host headers may not be removed", At: r}
		}
		hm.remove = append(hm.remove, r)
	}
	return hm, nil
}

// reservedHeader is a name Envoy's HeaderUtility refuses to modify or
// remove: ':'-prefixed, or host in any case.
func reservedHeader(name string) bool {
	return strings.HasPrefix(name, ":") || strings.EqualFold(name, "host")
}

// apply is HeaderParser::evaluateHeaders: removals first; then every
// entry is decided against the headers as they are after the removals
// (ADD_IF_ABSENT and OVERWRITE_IF_EXISTS look at those), an empty value is
// not added (keep_empty_value is not implemented, so it is false), and
// the overwrites are applied before the appends.
func (hm headerMutation) apply(h http.Header) {
	for _, r := range hm.remove {
		h.Del(r)
	}
	var overwrite, appendAdd []headerAdd
	for _, a := range hm.add {
		if a.value == "" {
			continue
		}
		_, exists := h[http.CanonicalHeaderKey(a.key)]
		switch a.action {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			appendAdd = append(appendAdd, a)
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if !exists {
				appendAdd = append(appendAdd, a)
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if exists {
				overwrite = append(overwrite, a)
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			overwrite = append(overwrite, a)
		}
	}
	for _, a := range overwrite {
		h.Set(a.key, a.value)
	}
	for _, a := range appendAdd {
		h.Add(a.key, a.value)
	}
}
