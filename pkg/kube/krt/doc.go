// Copyright infermesh authors
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

// Package krt is infermesh's library of typed reactive collections, modelled on
// Istio's krt (istio.io/istio/pkg/kube/krt) so that code ports between the two.
//
// Its one job: keep derived state equal to a pure function of its inputs, and
// recompute only what a change can affect.
//
// Inputs are collections fed from outside: NewStaticCollection (tests and file
// mode) and NewInformer / WrapClient (client-go informers). Derived collections
// are built from transformations: NewCollection (one output per input),
// NewManyCollection (any number), NewSingleton (no input), NewStatusCollection
// (a status for the input plus outputs) and JoinCollection (several collections
// of one type seen as one). A transformation reads other collections only
// through Fetch and FetchOne; each call records a dependency, and when a fetched
// collection changes, only the inputs whose recorded filters match the changed
// object (old or new version) run again. Indexes (NewIndex, NewNamespaceIndex)
// serve both Lookup from outside and Fetch inside a transformation.
//
// Outputs are compared before anything is emitted (the type's Equals method,
// else proto.Equal, else reflect.DeepEqual); an unchanged output sends no event.
// Every derived collection (and every handler given to Register) owns one
// goroutine and one FIFO queue, so a transformation never runs concurrently
// with itself and a slow handler delays only itself. A derived collection is synced once the inputs
// it registered on (its parent and everything it fetched) are synced and it has
// processed their initial state.
//
// Rules for callers:
//   - Transformations are pure: read only through Fetch, no client calls, no
//     clock, no mutation of their argument or of fetched objects.
//   - Objects returned by GetKey, List, Fetch and carried in events are shared
//     with the collection: never modify them.
//   - Pass WithStop to every collection that should be released; a collection
//     without a stop channel lives as long as the process.
//
// architecture/krt.md explains the design, with a diagram of the event flow.
//
// # Files
//
// The API:
//
//   - core.go: the interfaces and types every collection shares: Collection,
//     Singleton, EventStream, Event, Syncer, HandlerContext, the transformation
//     signatures and the accessor interfaces (ResourceNamer, Equaler, Labeler,
//     ...).
//   - options.go: CollectionOption: WithName, WithStop, WithDebugging.
//   - static.go: StaticCollection, the input collection a caller sets (tests,
//     file mode).
//   - informer.go: NewInformer and WrapClient, collections over client-go
//     informers.
//   - collection.go: NewCollection and NewManyCollection, and engine, which
//     runs a derived collection's transformations and reruns the inputs a
//     change can affect.
//   - status.go: NewStatusCollection and NewStatusManyCollection, a status for
//     each input beside its outputs.
//   - singleton.go: NewSingleton (derived) and NewStatic (set by the caller).
//   - join.go: JoinCollection, several collections of one type seen as one.
//   - fetch.go: Fetch and FetchOne, the dependencies they record, and the
//     reverse index that finds the inputs a change can affect.
//   - filter.go: the Fetch options (FilterKey, FilterLabel, FilterSelects,
//     FilterNamespace, FilterIndex, ...) and how a change is matched against a
//     recorded filter.
//   - index.go: Index: NewIndex and NewNamespaceIndex, with Lookup from outside
//     and Fetch inside a transformation.
//   - syncer.go: ManualSyncer, for inputs whose readiness krt cannot see.
//   - debug.go: DebugHandler (the JSON of /debug/krtz: each collection's
//     inputs, outputs and dependencies) and Stats.
//   - metrics.go: RegisterMetrics and the per-collection Prometheus metrics.
//
// The machinery:
//
//   - store.go: store, what every collection kind shares: objects by key,
//     indexes, registered handlers and sync state.
//   - labelindex.go: the per-namespace buckets by label pair and by selector
//     pair that make label and selector filters cheap.
//   - handler.go: handlerQueue, one goroutine and queue per registered handler.
//   - queue.go: fifo, the unbounded single-consumer queue behind engines and
//     handlers.
//   - typeinfo.go: the key, equality, label and namespace functions of a type,
//     resolved once, and GetKey.
package krt
