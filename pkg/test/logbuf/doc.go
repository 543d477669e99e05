// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package logbuf is a log destination tests read back while the code under
// test still writes to it from its own goroutines: a bytes.Buffer behind a
// mutex. One helper for every package's tests, rather than a copy in each.
//
// # Files
//
//   - logbuf.go: Buffer, with Write, String and Lines.
package logbuf
