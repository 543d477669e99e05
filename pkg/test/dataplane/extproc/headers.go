// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// field is one header entry, as in Envoy's HeaderMap: lower-case key, one
// value per entry, repeated keys kept as separate entries.
type field struct{ key, value string }

// headerMap is an ordered header map with pseudo-headers first.
type headerMap []field

// requestHeaderMap is what Envoy's ext_proc sends as request headers: the
// pseudo-headers :authority, :path, :method, :scheme and then every header
// (sorted here, for deterministic output).
func requestHeaderMap(method, path, authority, scheme string, h http.Header) headerMap {
	m := headerMap{{":authority", authority}, {":path", path}, {":method", method}, {":scheme", scheme}}
	return append(m, plainFields(h)...)
}

// responseHeaderMap is the response headers with :status first.
func responseHeaderMap(status int, h http.Header) headerMap {
	return append(headerMap{{":status", strconv.Itoa(status)}}, plainFields(h)...)
}

func plainFields(h http.Header) headerMap {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var m headerMap
	for _, k := range keys {
		lk := strings.ToLower(k)
		if lk == "host" {
			continue // carried as :authority, as in Envoy
		}
		for _, v := range h[k] {
			m = append(m, field{lk, v})
		}
	}
	return m
}

// get returns the first value of key.
func (m headerMap) get(key string) (string, bool) {
	for _, f := range m {
		if f.key == key {
			return f.value, true
		}
	}
	return "", false
}

func (m headerMap) has(key string) bool { _, ok := m.get(key); return ok }

func (m *headerMap) remove(key string) {
	out := (*m)[:0]
	for _, f := range *m {
		if f.key != key {
			out = append(out, f)
		}
	}
	*m = out
}

// set replaces every entry of key by one (Envoy's setCopy).
func (m *headerMap) set(key, value string) {
	for i, f := range *m {
		if f.key == key {
			(*m)[i].value = value
			rest := (*m)[i+1:]
			rest.remove(key)
			*m = append((*m)[:i+1], rest...)
			return
		}
	}
	*m = append(*m, field{key, value})
}

// add appends one more entry (Envoy's addCopy).
func (m *headerMap) add(key, value string) { *m = append(*m, field{key, value}) }

// plain returns the non-pseudo headers as an http.Header.
func (m headerMap) plain() http.Header {
	h := http.Header{}
	for _, f := range m {
		if !strings.HasPrefix(f.key, ":") {
			h.Add(f.key, f.value)
		}
	}
	return h
}

// toProto renders the map as Envoy sends it: each value in raw_value (the
// default since the runtime flag send_header_raw_value), never in value.
func (m headerMap) toProto() *corev3.HeaderMap {
	out := &corev3.HeaderMap{}
	for _, f := range m {
		out.Headers = append(out.Headers, &corev3.HeaderValue{Key: f.key, RawValue: []byte(f.value)})
	}
	return out
}

// MutationRules are Envoy's HeaderMutationRules
// (config.common.mutation_rules.v3), checked as Checker::isAllowed in
// source/extensions/filters/common/mutation_rules/mutation_rules.cc does,
// in its order: disallow_all refuses every change; unless
// allow_all_routing, the routing headers (host, :authority, :method,
// :scheme) are refused; with disallow_system every ':'-prefixed header;
// unless allow_envoy, x-envoy-* headers. A refused change is ignored and
// counted, or with disallow_is_error fails the request
// (CheckResult::FAIL, a local reply with status_on_error). The zero value
// is the rules Envoy applies without mutation_rules. The allow and
// disallow expressions are not implemented (Effective refuses them).
type MutationRules struct {
	AllowAllRouting, AllowEnvoy, DisallowSystem, DisallowAll, DisallowIsError bool
}

// immediateRules are the rules for ImmediateResponse headers: Envoy's
// immediate-response checker allows routing and x-envoy headers.
var immediateRules = MutationRules{AllowAllRouting: true, AllowEnvoy: true}

func isRoutingHeader(k string) bool {
	switch k {
	case ":authority", ":scheme", ":method", "host":
		return true
	}
	return false
}

// allowed is Checker::isAllowed.
func (r MutationRules) allowed(k string) bool {
	switch {
	case r.DisallowAll:
		return false
	case isRoutingHeader(k) && !r.AllowAllRouting:
		return false
	case strings.HasPrefix(k, ":") && r.DisallowSystem:
		return false
	case strings.HasPrefix(k, "x-envoy") && !r.AllowEnvoy:
		return false
	}
	return true
}

// allowRemove: ':'-prefixed headers and host are never removable
// (MutationUtils::applyHeaderMutations), whatever the rules.
func (r MutationRules) allowRemove(k string) bool {
	if strings.HasPrefix(k, ":") || k == "host" {
		return false
	}
	return r.allowed(k)
}

func (r MutationRules) allowSet(k, v string) bool {
	if !r.allowed(k) {
		return false
	}
	if k == ":status" {
		n, err := strconv.Atoi(v)
		return err == nil && n >= 200 && n <= 599
	}
	if strings.HasPrefix(k, ":") && k != ":path" && !isRoutingHeader(k) {
		return false // other pseudo-headers are not part of this model
	}
	return true
}

// refused handles a change the rules refuse: counted, and an error when
// disallow_is_error is set.
func (r MutationRules) refused(k string, c *Counters) error {
	c.RejectedHeaderMutations.Add(1)
	if r.DisallowIsError {
		return fmt.Errorf("header mutation of %s disallowed by mutation_rules", k)
	}
	return nil
}

func validName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if i == 0 && c == ':' {
			continue
		}
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

func validValue(v string) bool { return !strings.ContainsAny(v, "\x00\r\n") }

// applyHeaderMutation applies a HeaderMutation as Envoy's
// MutationUtils::applyHeaderMutations does: removals first, then sets.
// Invalid names or values, or both value and raw_value set, are errors (the
// filter answers with a local reply); changes the rules disallow are
// skipped and counted. A set_headers entry without append_action uses the
// deprecated `append` flag (default false: overwrite).
func applyHeaderMutation(mut *extprocsvc.HeaderMutation, m *headerMap, rules MutationRules, c *Counters) error {
	for _, k := range mut.GetRemoveHeaders() {
		if !validName(k) {
			c.RejectedHeaderMutations.Add(1)
			return fmt.Errorf("invalid character in remove_headers mutation")
		}
		k = strings.ToLower(k)
		if !rules.allowRemove(k) {
			if err := rules.refused(k, c); err != nil {
				return err
			}
			continue
		}
		m.remove(k)
	}
	for _, sh := range mut.GetSetHeaders() {
		h := sh.GetHeader()
		if h == nil {
			continue
		}
		if h.GetValue() != "" && len(h.GetRawValue()) > 0 {
			c.RejectedHeaderMutations.Add(1)
			return fmt.Errorf("only one of value or raw_value in the HeaderValue message should be set")
		}
		v := string(h.GetRawValue())
		if v == "" {
			v = h.GetValue() // Envoy reads raw_value; value is accepted here for older servers
		}
		if !validName(h.GetKey()) || !validValue(v) {
			c.RejectedHeaderMutations.Add(1)
			return fmt.Errorf("invalid character in set_headers mutation")
		}
		k := strings.ToLower(h.GetKey())
		if k == "host" {
			k = ":authority" // Envoy's Host header is :authority
		}
		var appendMode bool
		switch sh.GetAppendAction() {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			//lint:ignore SA1019 Envoy still honours the legacy append flag when append_action is left at its zero value
			if legacy := sh.GetAppend(); legacy != nil {
				appendMode = legacy.GetValue()
			}
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if m.has(k) {
				continue
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if !m.has(k) {
				continue
			}
		default:
			return fmt.Errorf("invalid append_action value for %s", k)
		}
		if !rules.allowSet(k, v) {
			if err := rules.refused(k, c); err != nil {
				return err
			}
			continue
		}
		if appendMode && !strings.HasPrefix(k, ":") {
			m.add(k, v)
		} else {
			m.set(k, v)
		}
	}
	return nil
}
