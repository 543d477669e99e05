// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newSource reads dir with collections tied to the test's lifetime.
func newSource(t *testing.T, dir string) *file.Source {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	s, err := file.New(dir, file.Options{
		Krt:      []krt.CollectionOption{krt.WithStop(stop)},
		Logger:   slog.New(slog.DiscardHandler),
		Debounce: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// run runs s.Run until the test ends, and waits for it to return. Changes
// made after run are seen: by Run's first read, which follows the watches,
// or by an event.
func run(t *testing.T, s *file.Source) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// waitFor waits (bounded) for cond, describing the problems on failure.
func waitFor(t *testing.T, s *file.Source, what string, cond func() bool) {
	t.Helper()
	poll.UntilOr(t, 10*time.Second, what, cond, func() string { return problemText(s.Problems()) })
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	// Write beside and rename, so the watcher never reads a half-written file
	// unless a test means it to.
	tmp := filepath.Join(filepath.Dir(p), ".tmp-"+filepath.Base(p))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

func problemText(ps []file.Problem) string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// docs joins YAML documents with separators.
func docs(ds ...string) string { return strings.Join(ds, "---\n") }

func splitLines(s string) []string { return strings.Split(s, "\n") }
