// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import "fmt"

// InvalidConfigError is configuration Envoy itself rejects (as opposed to
// an *UnimplementedFieldError, which Envoy would obey and this data plane
// does not implement). Reason is Envoy's own message.
type InvalidConfigError struct {
	// Source is the Envoy source file whose check this is.
	Source string
	// Reason is the message Envoy gives.
	Reason string
	// At names what was refused (a header name), "" when Reason says it.
	At string
}

func (e *InvalidConfigError) Error() string {
	if e.At != "" {
		return fmt.Sprintf("invalid, as Envoy (%s): %q: %s", e.Source, e.At, e.Reason)
	}
	return fmt.Sprintf("invalid, as Envoy (%s): %s", e.Source, e.Reason)
}
