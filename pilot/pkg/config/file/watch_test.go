// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

func hasProblem(s *file.Source, file, substr string) bool {
	for _, p := range s.Problems() {
		if p.File == file && strings.Contains(p.Error(), substr) {
			return true
		}
	}
	return false
}

func configValue(s *file.Source, key string) string {
	cm := s.ConfigMaps().GetKey(key)
	if cm == nil {
		return "<absent>"
	}
	return (*cm).Data["key"]
}

// Edits, deletes and truncations while Run watches.
func TestEdits(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "cm.yaml", configMap("cm", "v1"))
	write(t, dir, "other/pool.yaml", goodPool("pool"))
	s := newSource(t, dir)
	run(t, s)
	poolBefore := s.InferencePools().GetKey("llm-namespace/pool")

	// An edit updates the collection.
	write(t, dir, "cm.yaml", configMap("cm", "v2"))
	waitFor(t, s, "cm at v2", func() bool { return configValue(s, "llm-namespace/cm") == "v2" })
	// The untouched object was not replaced (it emitted no event).
	if s.InferencePools().GetKey("llm-namespace/pool") != poolBefore {
		t.Error("unchanged InferencePool was replaced by a reload")
	}

	// Truncating a file that held a good object keeps the object and reports
	// where the file breaks.
	rev := s.Revision()
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: llm-namespace\ndata:\n  key: [\"v3\",\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, "problem for truncated cm.yaml", func() bool { return hasProblem(s, "cm.yaml", "invalid YAML: line 7") })
	if s.Revision() <= rev {
		t.Error("a reload that changed the problems did not bump Revision")
	}
	if v := configValue(s, "llm-namespace/cm"); v != "v2" {
		t.Errorf("cm after truncation = %q, want the last good v2", v)
	}

	// Fixing the file clears the problem.
	write(t, dir, "cm.yaml", configMap("cm", "v4"))
	waitFor(t, s, "cm at v4", func() bool { return configValue(s, "llm-namespace/cm") == "v4" })
	if ps := s.Problems(); len(ps) != 0 {
		t.Errorf("problems after the fix:\n%s", problemText(ps))
	}

	// A new subfolder is watched; its files load.
	write(t, dir, "new/dir/cm2.yaml", configMap("cm2", "x"))
	waitFor(t, s, "cm2 loaded", func() bool { return configValue(s, "llm-namespace/cm2") == "x" })
	write(t, dir, "new/dir/cm2.yaml", configMap("cm2", "y"))
	waitFor(t, s, "cm2 updated", func() bool { return configValue(s, "llm-namespace/cm2") == "y" })

	// Deleting a file removes its objects.
	if err := os.Remove(filepath.Join(dir, "cm.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, "cm gone", func() bool { return s.ConfigMaps().GetKey("llm-namespace/cm") == nil })
	if err := os.RemoveAll(filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, "pool gone", func() bool { return s.InferencePools().GetKey("llm-namespace/pool") == nil })
}

// An edit that the API server would reject leaves the accepted version, as a
// rejected apply leaves the stored object; a valid edit then replaces it.
func TestInvalidEditKeepsAccepted(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "pool.yaml", goodPool("pool"))
	s := newSource(t, dir)
	run(t, s)

	write(t, dir, "pool.yaml", pool("pool", vllmSelector, ports(9)))
	waitFor(t, s, "too-many-ports problem", func() bool { return hasProblem(s, "pool.yaml", "Too many: 9") })
	if n := targetPorts(s, "llm-namespace/pool"); n != 1 {
		t.Errorf("pool has %d target ports after a rejected edit, want the accepted 1", n)
	}

	write(t, dir, "pool.yaml", pool("pool", vllmSelector, ports(2)))
	waitFor(t, s, "pool with 2 ports", func() bool { return targetPorts(s, "llm-namespace/pool") == 2 })
	if ps := s.Problems(); len(ps) != 0 {
		t.Errorf("problems after the fix:\n%s", problemText(ps))
	}
}

func targetPorts(s *file.Source, key string) int {
	p := s.InferencePools().GetKey(key)
	if p == nil {
		return -1
	}
	return len((*p).Spec.TargetPorts)
}

// A ConfigMap volume, updated as kubelet does: files live in a timestamped
// hidden folder, ..data links to it, the top-level names link through
// ..data, and an update renames a new link ..data_tmp over ..data.
func TestConfigMapVolumeSwap(t *testing.T) {
	dir := t.TempDir()
	mustDo(t, os.Mkdir(filepath.Join(dir, "..ts1"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(dir, "..ts1", "config.yaml"), []byte(configMap("cm", "one")), 0o644))
	mustDo(t, os.Symlink("..ts1", filepath.Join(dir, "..data")))
	mustDo(t, os.Symlink(filepath.Join("..data", "config.yaml"), filepath.Join(dir, "config.yaml")))
	s := newSource(t, dir)
	if v := configValue(s, "llm-namespace/cm"); v != "one" {
		t.Fatalf("cm = %q, want one (problems: %s)", v, problemText(s.Problems()))
	}
	run(t, s)

	mustDo(t, os.Mkdir(filepath.Join(dir, "..ts2"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(dir, "..ts2", "config.yaml"), []byte(configMap("cm", "two")), 0o644))
	mustDo(t, os.Symlink("..ts2", filepath.Join(dir, "..data_tmp")))
	mustDo(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	mustDo(t, os.RemoveAll(filepath.Join(dir, "..ts1")))
	waitFor(t, s, "cm at two", func() bool { return configValue(s, "llm-namespace/cm") == "two" })
	if n := len(s.ConfigMaps().List()); n != 1 {
		t.Errorf("%d ConfigMaps, want 1 (the hidden folders are not read)", n)
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Collections deliver the reload's differences as events: an edit is an
// update of that object only.
func TestReloadEvents(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", docs(configMap("a", "1"), configMap("b", "1")))
	s := newSource(t, dir)
	events := make(chan string, 16)
	reg := s.ConfigMaps().RegisterBatch(func(evs []krt.Event[*corev1.ConfigMap]) {
		for _, e := range evs {
			events <- e.Event.String() + " " + e.Latest().Name + "=" + e.Latest().Data["key"]
		}
	}, false)
	defer reg.UnregisterHandler()
	run(t, s)

	write(t, dir, "a.yaml", docs(configMap("a", "2"), configMap("b", "1")))
	if got := nextEvent(t, events); got != "update a=2" {
		t.Errorf("first event = %q, want update a=2", got)
	}
	write(t, dir, "a.yaml", configMap("a", "2"))
	if got := nextEvent(t, events); got != "delete b=1" {
		t.Errorf("second event = %q, want delete b=1 (nothing for unchanged a)", got)
	}
}

// nextEvent returns the next event, failing the test if none comes within a
// generous bound.
func nextEvent(t *testing.T, events <-chan string) string {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
		return ""
	}
}

// TestServerFields: objects carry what the API server would set: a uid
// stable across reloads, generation 1 on create and one more per spec
// change (not per label change), and the first creationTimestamp.
func TestServerFields(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "pool.yaml", goodPool("pool"))
	s := newSource(t, dir)
	run(t, s)
	get := func() *inferencev1.InferencePool {
		p := s.InferencePools().GetKey("llm-namespace/pool")
		if p == nil {
			t.Fatal("pool missing")
		}
		return *p
	}
	first := get()
	if first.Generation != 1 || first.UID == "" || first.CreationTimestamp.IsZero() {
		t.Fatalf("new pool: generation %d, uid %q, created %v; want 1, set, set", first.Generation, first.UID, first.CreationTimestamp)
	}
	// A label change: a new object, same generation and uid.
	write(t, dir, "pool.yaml", strings.Replace(goodPool("pool"), "  name: pool\n", "  name: pool\n  labels:\n    team: a\n", 1))
	waitFor(t, s, "labelled pool", func() bool { return get().Labels["team"] == "a" })
	if p := get(); p.Generation != 1 || p.UID != first.UID || !p.CreationTimestamp.Equal(&first.CreationTimestamp) {
		t.Errorf("after a label change: generation %d uid %q created %v; want 1, %q, %v", p.Generation, p.UID, p.CreationTimestamp, first.UID, first.CreationTimestamp)
	}
	// A spec change bumps the generation.
	write(t, dir, "pool.yaml", pool("pool", vllmSelector, ports(2)))
	waitFor(t, s, "pool with two ports", func() bool { return len(get().Spec.TargetPorts) == 2 })
	if p := get(); p.Generation != 2 || p.UID != first.UID {
		t.Errorf("after a spec change: generation %d uid %q; want 2, %q", p.Generation, p.UID, first.UID)
	}
	// A new Source over the same folder gives the same uid.
	if again := newSource(t, dir).InferencePools().GetKey("llm-namespace/pool"); again == nil || (*again).UID != first.UID {
		t.Error("uid differs across Sources")
	}
}

// TestFolderRecreated: a watched folder that is deleted keeps its last
// configuration, and once it is created again its new content loads (its
// watches died with it and must be made again).
func TestFolderRecreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	write(t, dir, "cm.yaml", configMap("cm", "v1"))
	s := newSource(t, dir)
	run(t, s)
	mustDo(t, os.RemoveAll(dir))
	rev := s.Revision()
	write(t, dir, "cm.yaml", configMap("cm", "v2"))
	waitFor(t, s, "cm at v2 in the recreated folder", func() bool { return configValue(s, "llm-namespace/cm") == "v2" })
	if s.Revision() <= rev {
		t.Error("no reload counted")
	}
	// The new folder is watched: a later edit is seen too.
	write(t, dir, "cm.yaml", configMap("cm", "v3"))
	waitFor(t, s, "cm at v3", func() bool { return configValue(s, "llm-namespace/cm") == "v3" })
}
