// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package logbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestConcurrentWritesAndLines(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				fmt.Fprintf(&b, "writer %d line %d\n", i, j)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 400 {
		t.Fatalf("%d lines, want 400", n)
	}
	if got := b.Lines("writer 3 line 7"); len(got) != 1 || got[0] != "writer 3 line 7" {
		t.Errorf("Lines = %q", got)
	}
}
