// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// headerMods is the Envoy form of RequestHeaderModifier /
// ResponseHeaderModifier: set → OVERWRITE_IF_EXISTS_OR_ADD, add →
// APPEND_IF_EXISTS_OR_ADD, remove → *_headers_to_remove.
//
// Two Envoy rules shape it (source/common/router/header_parser.cc,
// HeaderParser::configure, with Http::HeaderUtility::isModifiableHeader
// and isRemovableHeader): a `host` or ':'-prefixed name in headers_to_add
// or headers_to_remove makes Envoy reject the whole RouteConfiguration
// ("-prefixed or host headers may not be modified" / "... removed"), at
// every level (route configuration, virtual host, route, weighted cluster)
// and for responses too; and every headers_to_add value is a substitution
// format string (source/common/formatter/substitution_formatter.cc,
// SubstitutionFormatParser::parse), where a '%' not written "%%" must open
// a %COMMAND% or the configuration is rejected. So:
//
//   - a request Host set becomes host (the caller writes it as
//     RouteAction.host_rewrite_literal, a literal, not a formatter); a
//     request Host add does the same when no set names Host (Host is
//     single-valued: an added second Host would make the request invalid);
//   - removing Host, Host on a response, and ':'-prefixed names (which the
//     Gateway API's header name pattern already excludes) are described in
//     dropped, and the rule is not served (refusedMods; checkHeaderFilters
//     names the field in the route's status);
//   - every value is escaped: '%' is written "%%", so Envoy sends the
//     user's literal value.
type headerMods struct {
	add    []*corev3.HeaderValueOption
	remove []string
	// host is the request's new Host ("" for none).
	host string
	// dropped describes each modification Envoy refuses.
	dropped []string
}

// headerDirection says which message a header modifier applies to.
type headerDirection int

const (
	requestHeaders headerDirection = iota
	responseHeaders
)

func (d headerDirection) String() string {
	if d == requestHeaders {
		return "request"
	}
	return "response"
}

func toHeaderMods(fs []*gwv1.HTTPHeaderFilter, dir headerDirection) headerMods {
	var m headerMods
	var setHost, addHost string
	for _, f := range fs {
		for _, h := range f.Set {
			if name := strings.ToLower(string(h.Name)); m.keep(name, "set", dir) {
				m.add = append(m.add, headerOption(name, h.Value, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD))
			} else if name == "host" && dir == requestHeaders {
				setHost = h.Value
			}
		}
		for _, h := range f.Add {
			if name := strings.ToLower(string(h.Name)); m.keep(name, "add", dir) {
				m.add = append(m.add, headerOption(name, h.Value, corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD))
			} else if name == "host" && dir == requestHeaders {
				addHost = h.Value
			}
		}
		for _, h := range f.Remove {
			if name := strings.ToLower(h); m.keep(name, "remove", dir) {
				m.remove = append(m.remove, name)
			}
		}
	}
	m.host = setHost
	if m.host == "" {
		m.host = addHost
	}
	return m
}

// keep reports whether Envoy's HeaderParser accepts name in headers_to_add
// / headers_to_remove. A refused request Host set or add is not dropped:
// toHeaderMods turns it into host.
func (m *headerMods) keep(name, op string, dir headerDirection) bool {
	if !isEnvoyReservedHeader(name) {
		return true
	}
	if name == "host" && dir == requestHeaders && op != "remove" {
		return false
	}
	m.dropped = append(m.dropped, fmt.Sprintf("%s header %q: %s refused (Envoy refuses ':'-prefixed and host headers in header modifiers)", dir, name, op))
	return false
}

// isEnvoyReservedHeader is the negation of Envoy's
// Http::HeaderUtility::isModifiableHeader / isRemovableHeader: a
// ':'-prefixed name, or host in any case.
func isEnvoyReservedHeader(name string) bool {
	return strings.HasPrefix(name, ":") || strings.EqualFold(name, "host")
}

func headerOption(name, value string, action corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: name, Value: escapeFormatter(value)},
		AppendAction: action,
	}
}

// escapeFormatter writes a literal value as an Envoy substitution format
// string that formats to exactly that value: every '%' becomes "%%".
func escapeFormatter(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	return strings.ReplaceAll(v, "%", "%%")
}

// refusedMods is an error naming the header modifications Envoy would
// refuse (nil when there are none). The controller refuses such a rule
// before it reaches the translator (checkHeaderFilters, named by field);
// this is the translator's own guard, so the rule is left out rather than
// served without what the user asked for.
func refusedMods(mods ...headerMods) error {
	var all []string
	for _, m := range mods {
		all = append(all, m.dropped...)
	}
	if len(all) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(all, "; "))
}
