// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package status writes status that infermesh shares with other controllers:
// the status.parents lists of InferencePools and routes, which are atomic
// lists where each controller owns the entries with its controllerName.
//
// The rule (Gateway API and GIE): read the live object, replace only our
// entries, keep everyone else's exactly as they are, and write with
// UpdateStatus carrying the resourceVersion that was read, retrying on a
// conflict (HTTP 409). Server-side apply is not used for these lists: they
// are atomic, so an apply by one controller would take the whole list.
//
// Conditions keep their lastTransitionTime when their status did not change,
// and nothing is written when the merged status equals the live one, so a
// recomputation that changes nothing causes no write and no write loop.
//
// # Files
//
//   - parents.go: MergeParents, our entries of a parents list replaced and
//     everyone else's kept, and the conditions' lastTransitionTime kept or
//     stamped.
//   - update.go: UpdateShared, one read-modify-write of a shared status,
//     retried on conflict.
package status
