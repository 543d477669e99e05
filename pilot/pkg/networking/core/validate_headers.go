// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"regexp"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// headerLists is what one level of a route configuration (the route
// configuration, a virtual host, a route, a weighted cluster entry) adds
// to and removes from requests and responses.
type headerLists interface {
	GetRequestHeadersToAdd() []*corev3.HeaderValueOption
	GetRequestHeadersToRemove() []string
	GetResponseHeadersToAdd() []*corev3.HeaderValueOption
	GetResponseHeadersToRemove() []string
}

// checkHeaderMutations refuses, at every level of every route
// configuration, what Envoy's HeaderParser::configure refuses
// (source/common/router/header_parser.cc), which would reject the whole
// route configuration (Validate rule 6): a ':'-prefixed or host name in
// headers_to_add or headers_to_remove, and a headers_to_add value that is
// not a substitution format string Envoy parses. It is stricter than
// Envoy in one way: a value with a %COMMAND% is refused too, since the
// translator writes every value as a literal (see escapeFormatter), so a
// command can only be a value that escaped escaping.
func checkHeaderMutations(rc *routev3.RouteConfiguration, fail func(string, ...any)) {
	owner := fmt.Sprintf("route configuration %q", rc.GetName())
	checkHeaderLists(owner, rc, fail)
	for _, vh := range rc.GetVirtualHosts() {
		vhOwner := fmt.Sprintf("%s virtual host %q", owner, vh.GetName())
		checkHeaderLists(vhOwner, vh, fail)
		for _, r := range vh.GetRoutes() {
			rOwner := fmt.Sprintf("%s route %q", vhOwner, r.GetName())
			checkHeaderLists(rOwner, r, fail)
			for _, cw := range r.GetRoute().GetWeightedClusters().GetClusters() {
				checkHeaderLists(fmt.Sprintf("%s weighted cluster %q", rOwner, cw.GetName()), cw, fail)
			}
		}
	}
}

func checkHeaderLists(owner string, l headerLists, fail func(string, ...any)) {
	for dir, adds := range [][]*corev3.HeaderValueOption{l.GetRequestHeadersToAdd(), l.GetResponseHeadersToAdd()} {
		for _, o := range adds {
			k, v := o.GetHeader().GetKey(), o.GetHeader().GetValue()
			if isEnvoyReservedHeader(k) {
				fail("%s: %s header %q: :-prefixed or host headers may not be modified", owner, headerDirection(dir), k)
			}
			if err := checkLiteralFormat(v); err != nil {
				fail("%s: %s header %q: %w", owner, headerDirection(dir), k, err)
			}
		}
	}
	for dir, removes := range [][]string{l.GetRequestHeadersToRemove(), l.GetResponseHeadersToRemove()} {
		for _, k := range removes {
			if isEnvoyReservedHeader(k) {
				fail("%s: %s header %q: :-prefixed or host headers may not be removed", owner, headerDirection(dir), k)
			}
		}
	}
}

// formatCommand is the syntax of a command in Envoy's substitution format
// strings, % COMMAND (SUBCOMMAND) :LENGTH % (commandWithArgsRegex in
// source/common/formatter/substitution_formatter.cc).
var formatCommand = regexp.MustCompile(`^%([A-Z0-9_]+)(?:\((.*?)\))?(?::([0-9]+))?%`)

// checkLiteralFormat parses v as Envoy's SubstitutionFormatParser::parse
// does and accepts it only when it formats to a literal: "%%" is a '%';
// any other '%' must open a command, and Envoy refuses one that does not
// ("Couldn't find valid command"); a command is refused here as well.
func checkLiteralFormat(v string) error {
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			continue
		}
		if i+1 < len(v) && v[i+1] == '%' {
			i++
			continue
		}
		if m := formatCommand.FindStringSubmatch(v[i:]); m != nil {
			return fmt.Errorf("formatter command %%%s%% at position %d: values are written as literals, so no command may appear", m[1], i)
		}
		return fmt.Errorf("unescaped '%%' (Envoy: \"Incorrect configuration: %s. Couldn't find valid command at position %d\")", v, i)
	}
	return nil
}
