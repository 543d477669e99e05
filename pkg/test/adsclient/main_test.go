// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package adsclient

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every stream's reading goroutine has ended.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
