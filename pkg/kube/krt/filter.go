// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// FetchOption narrows what Fetch returns. Options combine with AND. Build
// them with the Filter functions; the zero value matches everything.
type FetchOption struct {
	kind filterKind
	str  string
	strs []string
	m    map[string]string
	idx  indexRef
	fn   func(any) bool
}

type filterKind uint8

const (
	filterNone filterKind = iota
	filterKeys
	filterIndex
	filterLabel
	filterSelects
	filterSelectsNonEmpty
	filterNamespace
	filterGeneric
)

// FilterKey keeps only the object with key k.
func FilterKey(k string) FetchOption { return FetchOption{kind: filterKeys, strs: []string{k}} }

// FilterKeys keeps only objects whose key is one of ks.
func FilterKeys(ks ...string) FetchOption { return FetchOption{kind: filterKeys, strs: ks} }

// FilterIndex keeps only objects that idx files under k. idx must be an index
// of the collection being fetched.
func FilterIndex[K comparable, O any](idx Index[K, O], k K) FetchOption {
	return FetchOption{kind: filterIndex, idx: idx.ref(), str: indexKeyString(k)}
}

// FilterLabel keeps objects whose labels (Labeler, or Kubernetes metadata)
// contain every pair of sel. An empty sel matches every object.
func FilterLabel(sel map[string]string) FetchOption { return FetchOption{kind: filterLabel, m: sel} }

// FilterSelects keeps objects whose selector (LabelSelectorer) is a subset of
// lbls. An object with an empty selector matches.
func FilterSelects(lbls map[string]string) FetchOption {
	return FetchOption{kind: filterSelects, m: lbls}
}

// FilterSelectsNonEmpty is FilterSelects, except that an object with an empty
// selector does not match (an empty Service selector selects nothing).
func FilterSelectsNonEmpty(lbls map[string]string) FetchOption {
	return FetchOption{kind: filterSelectsNonEmpty, m: lbls}
}

// FilterNamespace keeps objects in namespace ns (Namespacer or Kubernetes
// metadata).
func FilterNamespace(ns string) FetchOption { return FetchOption{kind: filterNamespace, str: ns} }

// FilterGeneric keeps objects for which f returns true. f receives the object
// (of the fetched collection's type) as any. A dependency with only generic
// filters cannot be narrowed: every change of the fetched collection is tested
// against it, so prefer the specific filters.
func FilterGeneric(f func(any) bool) FetchOption { return FetchOption{kind: filterGeneric, fn: f} }

// filter is the conjunction of a Fetch call's options, kept with the
// dependency so a later change can be tested against it.
//
// Its size matters: every input of a derived collection keeps one filter per
// Fetch its last run made (see inputState).
type filter struct {
	keys     []string          // flagKeys: the key is one of these
	index    indexRef          // non-nil: the index files the object under indexKey
	indexKey string            //
	labels   map[string]string // flagLabels: labels contain these
	selects  map[string]string // flagSelects: selector is a subset of these
	extra    *filterExtra      // rarely used filters, out of line to keep filter small
	flags    uint8
}

const (
	flagKeys uint8 = 1 << iota
	flagLabels
	flagSelects
	flagSelectsNonEmpty
	flagNamespace
	// flagNever: the options contradict each other (two values for one label
	// key, two namespaces); nothing can match.
	flagNever
)

type filterExtra struct {
	namespace string
	generic   []func(any) bool
}

func buildFilter(opts []FetchOption) filter {
	var f filter
	for i := range opts {
		f.add(&opts[i])
	}
	return f
}

// add ANDs one option into f.
func (f *filter) add(o *FetchOption) {
	switch o.kind {
	case filterNone:
	case filterKeys:
		if f.flags&flagKeys != 0 {
			f.keys = slices.DeleteFunc(slices.Clone(f.keys), func(k string) bool { return !slices.Contains(o.strs, k) })
		} else {
			f.keys = o.strs
			if len(f.keys) > 1 {
				f.keys = slices.Compact(slices.Sorted(slices.Values(f.keys)))
			}
			f.flags |= flagKeys
		}
	case filterIndex:
		if f.index != nil {
			panic("krt: Fetch takes at most one FilterIndex")
		}
		f.index, f.indexKey = o.idx, o.str
	case filterLabel:
		if f.flags&flagLabels != 0 {
			m := maps.Clone(f.labels)
			for k, v := range o.m {
				if have, ok := m[k]; ok && have != v {
					f.flags |= flagNever
				}
				m[k] = v
			}
			f.labels = m
		} else {
			f.labels = o.m
		}
		f.flags |= flagLabels
	case filterSelects, filterSelectsNonEmpty:
		if f.flags&flagSelects != 0 {
			panic("krt: Fetch takes at most one FilterSelects or FilterSelectsNonEmpty")
		}
		f.selects = o.m
		f.flags |= flagSelects
		if o.kind == filterSelectsNonEmpty {
			f.flags |= flagSelectsNonEmpty
		}
	case filterNamespace:
		if f.flags&flagNamespace != 0 && f.extra.namespace != o.str {
			f.flags |= flagNever
		}
		f.ensureExtra().namespace = o.str
		f.flags |= flagNamespace
	case filterGeneric:
		e := f.ensureExtra()
		e.generic = append(e.generic, o.fn)
	}
}

func (f *filter) ensureExtra() *filterExtra {
	if f.extra == nil {
		f.extra = &filterExtra{}
	}
	return f.extra
}

// equal reports whether two filters select the same objects by construction.
// Generic filters compare by identity of their slice, so a transformation that
// builds new closures on every run always counts as changed.
func (f *filter) equal(o *filter) bool {
	if f.flags != o.flags || f.index != o.index || f.indexKey != o.indexKey {
		return false
	}
	if f.flags&flagKeys != 0 && !slices.Equal(f.keys, o.keys) {
		return false
	}
	if f.flags&flagLabels != 0 && !maps.Equal(f.labels, o.labels) {
		return false
	}
	if f.flags&flagSelects != 0 && !maps.Equal(f.selects, o.selects) {
		return false
	}
	if (f.extra == nil) != (o.extra == nil) {
		return false
	}
	if f.extra != nil {
		if f.extra.namespace != o.extra.namespace || len(f.extra.generic) != len(o.extra.generic) {
			return false
		}
		if len(f.extra.generic) > 0 {
			return false // closures cannot be compared
		}
	}
	return true
}

// matches tests object o (key k) against every part of f except the index,
// which the caller checks (a fetch through an index bucket already satisfies
// it; dependency matching checks it with the object's cached index keys).
//
// pairs, when not nil, is f.labels as a slice (labelPairs): a caller testing
// many objects against one filter builds it once and saves a map iteration
// per object.
func matches[T any](ti *typeInfo[T], f *filter, pairs []labelPair, k string, o *T) bool {
	if f.flags&flagLabels != 0 {
		if pairs != nil {
			if !hasPairs(ti.labels(o), pairs) {
				return false
			}
		} else if !isSubset(f.labels, ti.labels(o)) {
			return false
		}
	}
	return matchesBesidesLabels(ti, f, k, o)
}

// matchesBesidesLabels is matches without the label filter, for objects read
// from a label bucket whose caller tests the labels itself.
func matchesBesidesLabels[T any](ti *typeInfo[T], f *filter, k string, o *T) bool {
	if f.flags&flagNever != 0 {
		return false
	}
	if f.flags&flagKeys != 0 && !slices.Contains(f.keys, k) {
		return false
	}
	if f.flags&flagSelects != 0 {
		sel := ti.selector(o)
		if len(sel) == 0 && f.flags&flagSelectsNonEmpty != 0 {
			return false
		}
		if !isSubset(sel, f.selects) {
			return false
		}
	}
	if f.extra != nil {
		if f.flags&flagNamespace != 0 && ti.namespace(o) != f.extra.namespace {
			return false
		}
		for _, g := range f.extra.generic {
			if !g(*o) {
				return false
			}
		}
	}
	return true
}

// checkSupported panics, naming the collection and type, when f uses an
// accessor T lacks: a programming error found on first use.
func checkSupported[T any](s *store[T], f *filter) {
	missing := func(what string) {
		panic(fmt.Sprintf("krt: Fetch on collection %q: type %s has no %s", s.name, s.ti.name, what))
	}
	if f.flags&flagLabels != 0 && s.ti.labels == nil {
		missing("labels (implement GetLabels() map[string]string)")
	}
	if f.flags&flagSelects != 0 && s.ti.selector == nil {
		missing("selector (implement GetLabelSelector() map[string]string)")
	}
	if f.flags&flagNamespace != 0 && s.ti.namespace == nil {
		missing("namespace (implement GetNamespace() string)")
	}
	if f.index != nil && f.index.collectionUID() != s.uid {
		panic(fmt.Sprintf("krt: Fetch on collection %q with FilterIndex of index %q, which belongs to another collection",
			s.name, f.index.indexName()))
	}
}

// labelPairs returns f's label filter as a slice (in buf when it fits), or
// nil when f has none.
func labelPairs(f *filter, buf []labelPair) []labelPair {
	if f.flags&flagLabels == 0 {
		return nil
	}
	pairs := buf[:0]
	for k, v := range f.labels {
		pairs = append(pairs, labelPair{k, v})
	}
	return pairs
}

// hasPairs reports whether labels contain every pair.
func hasPairs(labels map[string]string, pairs []labelPair) bool {
	if len(pairs) > len(labels) {
		return false
	}
	for _, p := range pairs {
		if v, ok := labels[p.k]; !ok || v != p.v {
			return false
		}
	}
	return true
}

// isSubset reports whether every pair of sub is in super.
func isSubset(sub, super map[string]string) bool {
	if len(sub) > len(super) {
		return false
	}
	for k, v := range sub {
		if sv, ok := super[k]; !ok || sv != v {
			return false
		}
	}
	return true
}

// String describes the filter for the debug dump.
func (f *filter) String() string {
	var parts []string
	if f.flags&flagKeys != 0 {
		parts = append(parts, "keys="+strings.Join(f.keys, ","))
	}
	if f.index != nil {
		parts = append(parts, "index "+f.index.indexName()+"="+f.indexKey)
	}
	if f.flags&flagLabels != 0 {
		parts = append(parts, "labels="+formatLabels(f.labels))
	}
	if f.flags&flagSelects != 0 {
		name := "selects"
		if f.flags&flagSelectsNonEmpty != 0 {
			name = "selectsNonEmpty"
		}
		parts = append(parts, name+"="+formatLabels(f.selects))
	}
	if f.extra != nil {
		if f.flags&flagNamespace != 0 {
			parts = append(parts, "namespace="+f.extra.namespace)
		}
		if n := len(f.extra.generic); n > 0 {
			parts = append(parts, fmt.Sprintf("generic(%d)", n))
		}
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}

func formatLabels(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return "{" + strings.Join(parts, ",") + "}"
}
