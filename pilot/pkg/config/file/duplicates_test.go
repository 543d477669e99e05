// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/logbuf"
)

// newLoggedSource is newSource with its warnings kept in the returned buffer.
func newLoggedSource(t *testing.T, dir string) (*file.Source, *logbuf.Buffer) {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	logs := &logbuf.Buffer{}
	s, err := file.New(dir, file.Options{
		Krt:      []krt.CollectionOption{krt.WithStop(stop)},
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		Debounce: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, logs
}

// One tenant's duplicate never takes over another's object: a duplicate in
// a file added later never takes over the
// established object, although its path sorts first; the warning is in the
// refused file and names the file that holds the served object. Edits of
// the holder stay served; a half-written holder keeps its last version.
// Once the holder is deleted, the remaining declaration is served.
func TestDuplicateInNewFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", configMap("c", "from-a"))
	s, logs := newLoggedSource(t, dir)
	run(t, s)

	write(t, dir, "0.yaml", configMap("c", "from-0"))
	const refused = "0.yaml: document 1 (ConfigMap llm-namespace/c): already defined in a.yaml document 1, " +
		"which was loaded first: that one stays served and this one is refused"
	waitFor(t, s, "a problem for the duplicate", func() bool { return len(s.Problems()) > 0 })
	if got := problemText(s.Problems()); got != refused {
		t.Errorf("problems:\n got %s\nwant %s", got, refused)
	}
	if v := configValue(s, "llm-namespace/c"); v != "from-a" {
		t.Errorf("llm-namespace/c = %q after 0.yaml was added, want the established from-a", v)
	}
	warned := false
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "manifest rejected") && strings.Contains(l, "file=0.yaml") && strings.Contains(l, "already defined in a.yaml") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning naming 0.yaml as refused and a.yaml as the holder; log:\n%s", logs)
	}

	write(t, dir, "a.yaml", configMap("c", "from-a2"))
	waitFor(t, s, "the holder's edit served", func() bool { return configValue(s, "llm-namespace/c") == "from-a2" })
	if got := problemText(s.Problems()); got != refused {
		t.Errorf("problems after the holder's edit:\n got %s\nwant %s", got, refused)
	}

	mustDo(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: [\n"), 0o644))
	waitFor(t, s, "a problem for the half-written a.yaml", func() bool { return hasProblem(s, "a.yaml", "invalid YAML") })
	if v := configValue(s, "llm-namespace/c"); v != "from-a2" {
		t.Errorf("llm-namespace/c = %q while a.yaml is half-written, want its last version from-a2", v)
	}
	if !hasProblem(s, "0.yaml", "already defined in a.yaml document 1, whose last accepted version stays served: this one is refused") {
		t.Errorf("problems while a.yaml is half-written:\n%s", problemText(s.Problems()))
	}

	mustDo(t, os.Remove(filepath.Join(dir, "a.yaml")))
	waitFor(t, s, "0.yaml's object served once a.yaml is gone", func() bool { return configValue(s, "llm-namespace/c") == "from-0" })
	if ps := s.Problems(); len(ps) != 0 {
		t.Errorf("problems after a.yaml was deleted:\n%s", problemText(ps))
	}
}
