// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package seedmodel holds, for tests, the seed scenario as the controller
// hands it to the xDS translator (pilot/pkg/model), so that the translator,
// ADS server and CLI tests all start from the same Gateway.
//
// # Files
//
//   - seedmodel.go: the seed's Gateway, its pool as a backend and the shadow
//     Service's name, as model values.
package seedmodel
