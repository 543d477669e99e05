// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
)

// route is an HTTPRoute in namespace team; created is the line under
// metadata stating its creationTimestamp, "" for none.
func route(name, created string) string {
	meta := ""
	if created != "" {
		meta = "\n  creationTimestamp: " + created
	}
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: %s
  namespace: team%s
spec:
  hostnames: [llm.example.com]
`, name, meta)
}

// unstated is the creationTimestamp of an object whose manifest states
// none (pilot/pkg/config/file/doc.go, "Creation time").
var unstated = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// createdOf returns the creationTimestamp of HTTPRoute team/name in s.
func createdOf(t *testing.T, s *file.Source, name string) time.Time {
	t.Helper()
	r := s.HTTPRoutes().GetKey("team/" + name)
	if r == nil {
		t.Fatalf("HTTPRoute team/%s missing; problems:\n%s", name, problemText(s.Problems()))
	}
	return (*r).CreationTimestamp.Time
}

// TestCreationTimestamp: an object's creationTimestamp comes from its
// manifest alone: the one stated (in UTC), else 9999-12-31T23:59:59Z (also
// for "null", as kubectl create --dry-run -o yaml writes it). It is the same
// in every Source over the folder, whenever it is read, and it follows an
// edit of the stated value, not the time of the edit.
func TestCreationTimestamp(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", route("a", ""))
	write(t, dir, "b.yaml", route("b", "2024-05-01T10:00:00Z"))
	write(t, dir, "c.yaml", route("c", "null"))
	write(t, dir, "d.yaml", route("d", `"2024-05-01T12:00:00+02:00"`))
	write(t, dir, "cm.yaml", configMap("cm", "v"))
	want := map[string]time.Time{
		"a": unstated, "b": time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC),
		"c": unstated, "d": time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC),
	}
	check := func(s *file.Source, when string) {
		t.Helper()
		for name, w := range want {
			if got := createdOf(t, s, name); !got.Equal(w) || got.Location() != time.UTC {
				t.Errorf("%s: HTTPRoute team/%s creationTimestamp = %v, want %v (UTC)", when, name, got, w)
			}
		}
		cm := s.ConfigMaps().GetKey("llm-namespace/cm")
		if cm == nil {
			t.Fatalf("%s: ConfigMap missing", when)
		}
		if got := (*cm).CreationTimestamp.Time; !got.Equal(unstated) {
			t.Errorf("%s: ConfigMap creationTimestamp = %v, want %v", when, got, unstated)
		}
	}
	s := newSource(t, dir)
	check(s, "first load")
	run(t, s)
	// A label edit keeps a's time; an edit of b's stated time moves b's.
	write(t, dir, "a.yaml", strings.Replace(route("a", ""), "namespace: team", "namespace: team\n  labels: {edited: \"1\"}", 1))
	write(t, dir, "b.yaml", route("b", "2023-01-01T00:00:00Z"))
	waitFor(t, s, "edits loaded", func() bool {
		a := s.HTTPRoutes().GetKey("team/a")
		return a != nil && (*a).Labels["edited"] == "1" && createdOf(t, s, "b").Equal(time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC))
	})
	want["b"] = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	check(s, "after the edits")
	// Another replica, or a restart: the same times.
	check(newSource(t, dir), "a second Source")
}

// TestCreationTimestampInvalid: a creationTimestamp that is not RFC 3339 is
// a problem naming the file and the field; the object is left out.
func TestCreationTimestampInvalid(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", route("a", "yesterday"))
	s := newSource(t, dir)
	if s.HTTPRoutes().GetKey("team/a") != nil {
		t.Error("a route with an invalid creationTimestamp was accepted")
	}
	const want = `metadata.creationTimestamp: Invalid value: "yesterday": want an RFC 3339 time`
	if !hasProblem(s, "a.yaml", want) {
		t.Errorf("no problem of a.yaml says %q:\n%s", want, problemText(s.Problems()))
	}
}
