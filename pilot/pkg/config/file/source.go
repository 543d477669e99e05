// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	imv1alpha1 "github.com/infermesh/infermesh/pkg/apis/infermesh/v1alpha1"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Options configures a Source.
type Options struct {
	// Krt is passed to every collection (after which the Source names each
	// one after its accessor: "Pods", "InferencePools", ...).
	Krt []krt.CollectionOption
	// Logger receives one warning per problem per reload; nil means
	// slog.Default().
	Logger *slog.Logger
	// Debounce is the quiet period after a filesystem event before Run
	// reloads; 0 means 100ms. A steady stream of events delays a reload by
	// at most ten times this.
	Debounce time.Duration
	// GatewayAPIChannel is the channel whose CRDs Gateway API kinds are
	// checked against; empty is ChannelStandard.
	GatewayAPIChannel Channel
}

const defaultDebounce = 100 * time.Millisecond

// Source is the configuration read from a folder of manifests, as krt
// collections of the same element types as *kube.Client's. New reads the
// folder once; Run keeps the collections equal to it. Safe for concurrent use.
type Source struct {
	dir  string
	opts Options
	log  *slog.Logger
	dec  *decoder

	namespaces         krt.StaticCollection[*corev1.Namespace]
	pods               krt.StaticCollection[*corev1.Pod]
	services           krt.StaticCollection[*corev1.Service]
	endpointSlices     krt.StaticCollection[*discoveryv1.EndpointSlice]
	secrets            krt.StaticCollection[*corev1.Secret]
	configMaps         krt.StaticCollection[*corev1.ConfigMap]
	gateways           krt.StaticCollection[*gatewayv1.Gateway]
	gatewayClasses     krt.StaticCollection[*gatewayv1.GatewayClass]
	httpRoutes         krt.StaticCollection[*gatewayv1.HTTPRoute]
	grpcRoutes         krt.StaticCollection[*gatewayv1.GRPCRoute]
	tlsRoutes          krt.StaticCollection[*gatewayv1.TLSRoute]
	tcpRoutes          krt.StaticCollection[*gatewayv1.TCPRoute]
	referenceGrants    krt.StaticCollection[*gatewayv1.ReferenceGrant]
	backendTLSPolicies krt.StaticCollection[*gatewayv1.BackendTLSPolicy]
	listenerSets       krt.StaticCollection[*gatewayv1.ListenerSet]
	inferencePools     krt.StaticCollection[*inferencev1.InferencePool]
	destinationRules   krt.StaticCollection[kube.DestinationRule]
	externalProcessors krt.StaticCollection[*imv1alpha1.ExternalProcessor]
	sinks              map[string]sink // by collection name

	// state is the committed folder; only New, then Run's goroutine, use
	// it.
	state    *folder
	mu       sync.Mutex // guards problems
	problems []Problem
	revision atomic.Uint64
	// decodedDocs counts the documents decoded and validated since New.
	decodedDocs atomic.Int64
	// beforeDecode, when set (tests), is called by a reload's decoding
	// goroutine once the identities are sent, before validating.
	beforeDecode func(file string)
}

// New reads every manifest under dir once, synchronously, and returns a
// Source whose collections hold the accepted objects and are synced. Problems
// with manifests are not errors (see Problems); New fails only when dir
// itself cannot be read, or when the embedded CRDs are broken (a build defect).
func New(dir string, opts Options) (*Source, error) {
	crds, err := crdsFor(opts.GatewayAPIChannel)
	if err != nil {
		return nil, fmt.Errorf("file: embedded CRDs: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Debounce <= 0 {
		opts.Debounce = defaultDebounce
	}
	s := &Source{dir: dir, opts: opts, log: opts.Logger, dec: &decoder{crds: crds}, sinks: map[string]sink{}, state: newFolder()}
	sc, err := listManifests(dir)
	if err != nil {
		return nil, fmt.Errorf("file: read %s: %w", dir, err)
	}
	readAt := time.Now()
	fds, unread := s.readFiles(sc.files)
	ups := make([]fileUpdate, len(sc.files))
	for i, f := range sc.files {
		ups[i] = fileUpdate{file: f, state: fileState{stat: sc.stats[i], readAt: readAt, fd: fds[i], unread: unread[i]}}
		if fds[i] != nil {
			ups[i].state.sum = fds[i].sum
		}
	}
	s.state.scanProblems = sc.problems
	s.state.commit(ups)
	s.problems = s.state.problemList()
	s.logProblems(nil)

	objs := sortedObjects(s.state.accepted)
	loaded := changes{}
	for _, o := range objs {
		if o.coll != "" {
			loaded.add(o.coll, "added", o.key, s.log)
		}
	}
	s.log.Info("file: loaded", "dir", dir, "changes", loaded.String(), "objects", len(s.state.accepted), "rejected", len(s.problems))
	s.namespaces = newCollection[*corev1.Namespace](s, "Namespaces", objs)
	s.pods = newCollection[*corev1.Pod](s, "Pods", objs)
	s.services = newCollection[*corev1.Service](s, "Services", objs)
	s.endpointSlices = newCollection[*discoveryv1.EndpointSlice](s, "EndpointSlices", objs)
	s.secrets = newCollection[*corev1.Secret](s, "Secrets", objs)
	s.configMaps = newCollection[*corev1.ConfigMap](s, "ConfigMaps", objs)
	s.gateways = newCollection[*gatewayv1.Gateway](s, "Gateways", objs)
	s.gatewayClasses = newCollection[*gatewayv1.GatewayClass](s, "GatewayClasses", objs)
	s.httpRoutes = newCollection[*gatewayv1.HTTPRoute](s, "HTTPRoutes", objs)
	s.grpcRoutes = newCollection[*gatewayv1.GRPCRoute](s, "GRPCRoutes", objs)
	s.tlsRoutes = newCollection[*gatewayv1.TLSRoute](s, "TLSRoutes", objs)
	s.tcpRoutes = newCollection[*gatewayv1.TCPRoute](s, "TCPRoutes", objs)
	s.referenceGrants = newCollection[*gatewayv1.ReferenceGrant](s, "ReferenceGrants", objs)
	s.backendTLSPolicies = newCollection[*gatewayv1.BackendTLSPolicy](s, "BackendTLSPolicies", objs)
	s.listenerSets = newCollection[*gatewayv1.ListenerSet](s, "ListenerSets", objs)
	s.inferencePools = newCollection[*inferencev1.InferencePool](s, "InferencePools", objs)
	s.destinationRules = newCollection[kube.DestinationRule](s, "DestinationRules", objs)
	s.externalProcessors = newCollection[*imv1alpha1.ExternalProcessor](s, "ExternalProcessors", objs)
	return s, nil
}

// Namespaces returns the accepted Namespaces.
func (s *Source) Namespaces() krt.Collection[*corev1.Namespace] { return s.namespaces }

// Pods returns the accepted Pods.
func (s *Source) Pods() krt.Collection[*corev1.Pod] { return s.pods }

// Services returns the accepted Services.
func (s *Source) Services() krt.Collection[*corev1.Service] { return s.services }

// EndpointSlices returns the accepted EndpointSlices (discovery.k8s.io/v1).
func (s *Source) EndpointSlices() krt.Collection[*discoveryv1.EndpointSlice] { return s.endpointSlices }

// Secrets returns the accepted Secrets.
func (s *Source) Secrets() krt.Collection[*corev1.Secret] { return s.secrets }

// ConfigMaps returns the accepted ConfigMaps.
func (s *Source) ConfigMaps() krt.Collection[*corev1.ConfigMap] { return s.configMaps }

// Gateways returns the accepted Gateways (v1 and v1beta1 manifests, as v1).
func (s *Source) Gateways() krt.Collection[*gatewayv1.Gateway] { return s.gateways }

// GatewayClasses returns the accepted GatewayClasses.
func (s *Source) GatewayClasses() krt.Collection[*gatewayv1.GatewayClass] { return s.gatewayClasses }

// HTTPRoutes returns the accepted HTTPRoutes.
func (s *Source) HTTPRoutes() krt.Collection[*gatewayv1.HTTPRoute] { return s.httpRoutes }

// GRPCRoutes returns the accepted GRPCRoutes.
func (s *Source) GRPCRoutes() krt.Collection[*gatewayv1.GRPCRoute] { return s.grpcRoutes }

// TLSRoutes returns the accepted TLSRoutes.
func (s *Source) TLSRoutes() krt.Collection[*gatewayv1.TLSRoute] { return s.tlsRoutes }

// TCPRoutes returns the accepted TCPRoutes.
func (s *Source) TCPRoutes() krt.Collection[*gatewayv1.TCPRoute] { return s.tcpRoutes }

// ReferenceGrants returns the accepted ReferenceGrants.
func (s *Source) ReferenceGrants() krt.Collection[*gatewayv1.ReferenceGrant] {
	return s.referenceGrants
}

// BackendTLSPolicies returns the accepted BackendTLSPolicies.
func (s *Source) BackendTLSPolicies() krt.Collection[*gatewayv1.BackendTLSPolicy] {
	return s.backendTLSPolicies
}

// ListenerSets returns the accepted ListenerSets.
func (s *Source) ListenerSets() krt.Collection[*gatewayv1.ListenerSet] { return s.listenerSets }

// InferencePools returns the accepted InferencePools (inference.networking.k8s.io/v1).
func (s *Source) InferencePools() krt.Collection[*inferencev1.InferencePool] { return s.inferencePools }

// DestinationRules returns the accepted Istio DestinationRules, converted
// with kube.DestinationRuleFromUnstructured.
func (s *Source) DestinationRules() krt.Collection[kube.DestinationRule] { return s.destinationRules }

// ExternalProcessors returns the accepted infermesh.io ExternalProcessors,
// checked against the chart's CRD (schema and CEL rules).
func (s *Source) ExternalProcessors() krt.Collection[*imv1alpha1.ExternalProcessor] {
	return s.externalProcessors
}

// Problems returns the problems of the latest read, sorted by file, then
// document. The slice is the caller's.
func (s *Source) Problems() []Problem {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.problems)
}

// Revision counts the reloads that changed an object or the problems; New's
// read is revision 0. Tests wait for it instead of sleeping.
func (s *Source) Revision() uint64 { return s.revision.Load() }

// sink is the write side of one collection.
type sink interface {
	// apply deletes the objects of keys deletes and adds or replaces
	// updates, as one batch of events (krt.StaticCollection.ConditionalApply).
	apply(deletes []string, updates []any)
}

type staticSink[T any] struct{ c krt.StaticCollection[T] }

func (s staticSink[T]) apply(deletes []string, updates []any) {
	vals := make([]T, len(updates))
	for i, u := range updates {
		vals[i] = u.(T)
	}
	s.c.ConditionalApply(deletes, vals)
}

func newCollection[T any](s *Source, name string, objs []object) krt.StaticCollection[T] {
	var vals []T
	for _, o := range objs {
		if o.coll == name {
			vals = append(vals, o.value.(T))
		}
	}
	opts := append(slices.Clone(s.opts.Krt), krt.WithName(name))
	c := krt.NewStaticCollection[T](nil, vals, opts...)
	s.sinks[name] = staticSink[T]{c}
	return c
}

// sortedObjects returns m's objects by collection, then key.
func sortedObjects(m map[objectID]object) []object {
	objs := make([]object, 0, len(m)) // sized once: slices.Collect grows it by copying
	for _, o := range m {
		objs = append(objs, o)
	}
	return sortObjects(objs)
}

// sortObjects sorts objs by collection, then key (then group and kind, for
// objects of no collection), and returns it. It sorts indices, then moves
// each object once, in place: an object is a few hundred bytes, and a
// folder of model servers holds a hundred thousand of them.
func sortObjects(objs []object) []object {
	order := make([]int32, len(objs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		a, b := &objs[i], &objs[j]
		return cmp.Or(strings.Compare(a.coll, b.coll), strings.Compare(a.key, b.key),
			strings.Compare(a.id.group, b.id.group), strings.Compare(a.id.kind, b.id.kind))
	})
	// order[i] is the index of the object that goes to place i: follow each
	// cycle of the permutation, marking the places filled.
	for start := range order {
		if order[start] < 0 || int(order[start]) == start {
			continue
		}
		held := objs[start]
		at := start
		for {
			from := int(order[at])
			order[at] = -1
			if from == start {
				objs[at] = held
				break
			}
			objs[at] = objs[from]
			at = from
		}
	}
	return objs
}

// apply commits ups (and, when scan is not nil, the listing's problems),
// hands the collections the differences and logs the reload. It runs on
// Run's goroutine.
func (s *Source) apply(ups []fileUpdate, scan []Problem) {
	if scan != nil {
		s.state.scanProblems = scan
	}
	prev, next := s.state.commit(ups)
	ch := s.applyDiff(prev, next)
	problems := s.state.problemList()
	s.mu.Lock()
	prevProblems := s.problems
	s.problems = problems
	s.mu.Unlock()
	if len(ch) == 0 && slices.Equal(prevProblems, problems) {
		return
	}
	s.logProblems(prevProblems)
	s.revision.Add(1)
	files := make([]string, len(ups))
	for i, u := range ups {
		files[i] = u.file
	}
	s.log.Info("file: reloaded", "dir", s.dir, "files", strings.Join(files, ", "), "changes", ch.String(),
		"objects", len(s.state.accepted), "rejected", len(problems))
}

// applyDiff deletes from the collections what is gone and updates what is
// new or changed (by digest), in collection and key order, one batch per
// collection, given the previous and new versions of the objects a commit
// decided (commit). It
// returns the changes per collection (empty when nothing differed), and
// logs each changed object at debug.
func (s *Source) applyDiff(prev, next map[objectID]object) changes {
	var deleted, updated []object
	for _, o := range prev {
		if n, ok := next[o.id]; !ok || n.coll != o.coll || n.key != o.key {
			if o.coll != "" {
				deleted = append(deleted, o)
			}
		}
	}
	for _, o := range next {
		p, ok := prev[o.id]
		if ok && p.digest == o.digest && p.coll == o.coll && p.key == o.key {
			continue
		}
		if o.coll != "" {
			updated = append(updated, o)
		}
	}
	ch := changes{}
	type batch struct {
		deletes []string
		updates []any
	}
	batches := map[string]*batch{}
	batchOf := func(coll string) *batch {
		b := batches[coll]
		if b == nil {
			b = &batch{}
			batches[coll] = b
		}
		return b
	}
	for _, o := range sortObjects(deleted) {
		b := batchOf(o.coll)
		b.deletes = append(b.deletes, o.key)
		ch.add(o.coll, "deleted", o.key, s.log)
	}
	for _, o := range sortObjects(updated) {
		b := batchOf(o.coll)
		b.updates = append(b.updates, o.value)
		op := "updated"
		if p, ok := prev[o.id]; !ok || p.coll != o.coll || p.key != o.key {
			op = "added"
		}
		ch.add(o.coll, op, o.key, s.log)
	}
	// One batch per collection, in collection order: a commit of ten
	// thousand routes is one round for each derived collection, not ten
	// thousand events that it takes a few at a time.
	colls := make([]string, 0, len(batches))
	for coll := range batches {
		colls = append(colls, coll)
	}
	slices.Sort(colls)
	for _, coll := range colls {
		b := batches[coll]
		s.sinks[coll].apply(b.deletes, b.updates)
	}
	return ch
}

// changes counts, per collection ("Services") and operation (added,
// updated, deleted), the objects a reload changed.
type changes map[string]map[string]int

func (c changes) add(coll, op, key string, log *slog.Logger) {
	m := c[coll]
	if m == nil {
		m = map[string]int{}
		c[coll] = m
	}
	m[op]++
	log.Debug("file: object "+op, "kind", coll, "key", key)
}

// String is "HTTPRoutes: 1 added, 1 updated; Services: 1 deleted", kinds
// in name order.
func (c changes) String() string {
	kinds := make([]string, 0, len(c))
	for k := range c {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		var ops []string
		for _, op := range []string{"added", "updated", "deleted"} {
			if n := c[k][op]; n > 0 {
				ops = append(ops, fmt.Sprintf("%d %s", n, op))
			}
		}
		parts = append(parts, k+": "+strings.Join(ops, ", "))
	}
	return strings.Join(parts, "; ")
}

// logProblems logs each current problem that is not among prev, so a
// problem is logged once, when it appears, not again at every reload.
func (s *Source) logProblems(prev []Problem) {
	seen := make(map[Problem]bool, len(prev))
	for _, p := range prev {
		seen[p] = true
	}
	for _, p := range s.Problems() {
		if seen[p] {
			continue
		}
		s.log.Warn("file: manifest rejected", "file", p.File, "document", p.Document, "line", p.Line,
			"kind", p.Kind, "key", p.objectName(), "field", p.Field, "error", p.Message)
	}
}
