// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package writer is the edge where desired state, computed as krt
// collections, becomes writes to the API server, and only on the leader.
//
// Its one job: keep live objects equal to desired data, level-triggered.
//
// Inputs:
//   - a krt collection of desired state: [Desired] (an object we own, as a
//     client-go apply configuration) or [DesiredStatus] (our entries of a
//     shared status.parents list);
//   - optionally a krt collection of the live objects (an informer), so that a
//     change by someone else (drift of our fields, a status write that dropped
//     our entries) is noticed and repaired promptly;
//   - IsLeader, usually leaderelection.Elector.IsLeader.
//
// Outputs: writes through pkg/kube/apply (server-side apply of owned objects,
// with the ownership check and drift events) and pkg/kube/status
// (read-modify-write of shared status with retry on conflict).
//
// The loop ([OwnedWriter.Run], [StatusWriter.Run]) runs once per leadership
// term: pass Run to Elector.AddRunFunction. Each term builds a fresh
// rate-limited client-go workqueue of keys ("namespace/name"), registers on the
// desired collection with its current state replayed (so a new leader enqueues
// every key and converges from whatever it finds) and on the live collection,
// and Workers goroutines (default DefaultWorkers) pop keys until the term's
// context ends; the queue never gives one key to two of them at once. For
// each key a worker reads the CURRENT desired object from the collection
// (never the event's copy), checks IsLeader, and writes. An error requeues the key with
// the rate limiter's backoff; success forgets it.
//
// Rules:
//   - Owned objects: when the desired object is gone, nothing is written. An
//     owned object is removed by garbage collection through its
//     ownerReferences, not by us; the writer only forgets what it remembered.
//   - Owned objects: an object with our name but without our ownership label
//     (apply.ErrNotOwned) is never written. It is logged once per key and not
//     retried; a later change of the desired or of the live object (for
//     example the label being added, or the object deleted) enqueues it again.
//   - Shared status: desired conditions may leave lastTransitionTime zero (so
//     that recomputing them gives an equal value and no event); the writer
//     stamps them with the time of the write, and the merge keeps the live
//     time of each condition whose status did not change.
//   - Shared status: when the desired status is gone, our entries are removed
//     from the live list (everyone else's stay); the live status is written
//     only when the merged list differs from it.
//   - Desired state must be in the form the API server stores (defaults
//     applied: for example a Gateway API parentRef's group and kind). The
//     writers compare desired with live to decide whether to write; a
//     difference that is only defaulting is seen as a change, and then every
//     event of the object causes a write (a no-op for the server, but a
//     request each time).
//   - Owned objects: a sync whose live collection holds the object with our
//     field manager's applied fields already as desired
//     (apply.Owned.UpToDate; the Client keeps those entries with
//     kube.WithAppliedFieldsOf) makes no request: a new leader's term, which
//     syncs every key, then reads and writes only what differs. Any other
//     sync reads the object from the API server and applies as before; a
//     stale cached copy only delays a write until its newer version's event.
//   - Nothing is processed before the desired collection has synced, so a
//     partial view never reads as "nothing desired".
//   - Nothing is written while IsLeader is false; keys popped then are dropped
//     (the next term enqueues everything again).
//
// # Files
//
//   - desired.go: Desired and DesiredStatus, the desired-state types the
//     writers read.
//   - queue.go: one leadership term's queue: the sources registered, the
//     workers, and the batch log line.
//   - owned.go: OwnedWriter, server-side apply of the objects we own through
//     pkg/kube/apply.
//   - ownedstatus.go: OwnedStatusWriter, the status of objects whose status we
//     alone write (our Gateways and GatewayClasses).
//   - status.go: StatusWriter, our entries of shared status.parents lists
//     through pkg/kube/status.
package writer
