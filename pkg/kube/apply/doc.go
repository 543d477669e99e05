// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package apply writes the objects infermesh owns (shadow Services, Gateway
// Deployments, Services, ServiceAccounts and bootstrap ConfigMaps) with
// server-side apply.
//
// Rules, in order, for one desired object:
//  1. An object with the desired name that lacks our ownership label is
//     someone else's: it is never written, and Apply returns ErrNotOwned. So
//     that no race turns someone else's object into ours, a missing object is
//     created with Create (which fails if it appeared meanwhile), and an
//     apply over a live object carries the resourceVersion that was checked
//     (the API server rejects it with 409 Conflict if the object changed).
//  2. The fields our field manager owns on the live object are extracted
//     (client-go's generated Extract functions read managedFields); if they
//     equal the desired apply configuration nothing is written, so a
//     recomputation that changes nothing writes nothing.
//  3. Otherwise the desired configuration is applied with Force, taking back
//     any of our fields another manager took. If our desired state had not
//     changed since we last applied it, the difference is drift: a Warning
//     event is recorded on the object.
//  4. If the API server rejects the apply because a field is immutable (for
//     example spec.clusterIP of a Service that must become headless), the
//     object (still ours, checked by UID) is deleted and created again.
//
// Writes are level-triggered and idempotent: any replica that becomes leader
// converges from whatever state it finds.
//
// # Files
//
//   - apply.go: Owned, whose Apply follows the rules above, with ErrNotOwned,
//     Result and UpToDate.
//   - status.go: OwnedStatus, server-side apply of the status subresource of
//     objects whose status we alone write (our Gateways and GatewayClasses).
package apply
