// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// referenceDecide is how the whole folder was decided on every reload
// before reloads became incremental (the load of 971f2d5, with its
// pickDeclarations): all files' declarations at once, given what was
// accepted before. The incremental commits must reach its outcome.
func referenceDecide(files map[string]*fileState, scanProblems []Problem, prev map[objectID]object) (map[objectID]object, []Problem) {
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	slices.Sort(names)
	problems := slices.Clone(scanProblems)
	var candidates []object
	broken := map[string]bool{}
	rejected := map[objectID]bool{}
	rejectedIn := map[fileObject]bool{}
	for _, f := range names {
		st := files[f]
		if st.fd == nil {
			problems = append(problems, st.unread)
			broken[f] = true
			continue
		}
		candidates = append(candidates, st.fd.objects...)
		problems = append(problems, st.fd.problems...)
		if st.fd.broken {
			broken[f] = true
		}
		for _, id := range st.fd.rejected {
			rejected[id] = true
			rejectedIn[fileObject{file: f, id: id}] = true
		}
	}
	held := func(fo fileObject) bool { return broken[fo.file] || rejectedIn[fo] }
	// pickDeclarations, as it was.
	first := map[objectID]int{}
	more := map[objectID][]int{}
	for i, c := range candidates {
		if _, seen := first[c.id]; seen {
			more[c.id] = append(more[c.id], i)
		} else {
			first[c.id] = i
		}
	}
	accepted := map[objectID]object{}
	for i, c := range candidates {
		id := c.id
		if first[id] != i {
			continue
		}
		if len(more[id]) == 0 {
			if p, ok := prev[id]; !ok || p.ref.file == c.ref.file || !held(fileObject{file: p.ref.file, id: id}) {
				accepted[id] = c
				continue
			}
		}
		decls := []object{c}
		for _, j := range more[id] {
			decls = append(decls, candidates[j])
		}
		winner, why := 0, "which is first by path: that one is served"
		if p, ok := prev[id]; ok {
			if i := slices.IndexFunc(decls, func(o object) bool { return o.ref.file == p.ref.file }); i >= 0 {
				winner, why = i, "which was loaded first: that one stays served"
			} else if held(fileObject{file: p.ref.file, id: id}) {
				for _, d := range decls {
					pr := d.ref.problem("", fmt.Sprintf(
						"already defined in %s document %d, whose last accepted version stays served: this one is refused",
						p.ref.file, p.ref.doc))
					pr.DefinedIn = p.ref.file
					problems = append(problems, pr)
				}
				continue
			}
		}
		w := decls[winner]
		accepted[id] = w
		for i, d := range decls {
			if i != winner {
				pr := d.ref.problem("", fmt.Sprintf(
					"already defined in %s document %d, %s and this one is refused", w.ref.file, w.ref.doc, why))
				pr.DefinedIn = w.ref.file
				problems = append(problems, pr)
			}
		}
	}
	for id, o := range prev {
		if _, ok := accepted[id]; !ok && (broken[o.ref.file] || rejected[id]) {
			accepted[id] = o
		}
	}
	sortProblems(problems)
	return accepted, problems
}

// servedView is what a decision serves, per object: the declaring file
// and document, and the digest.
func servedView(m map[objectID]object) map[string]string {
	out := map[string]string{}
	for id, o := range m {
		out[fmt.Sprintf("%+v", id)] = fmt.Sprintf("%s#%d %x", o.ref.file, o.ref.doc, o.digest)
	}
	return out
}

func testDecoder(t testing.TB) *Source {
	t.Helper()
	crds, err := embeddedCRDs()
	if err != nil {
		t.Fatal(err)
	}
	return &Source{dec: &decoder{crds: crds}, state: newFolder()}
}

// TestCommitsDecideAsTheWholeFolder: over random steps, each changing some
// files (documents added, edited, made invalid or half-written, files made
// unreadable or deleted; few object names, so declarations collide across
// files), the changed files are committed in groups that share no object
// (as the reloader groups them), in random order; after every commit the
// accepted objects and the problems are those of deciding the whole folder
// at once as before (referenceDecide), with the files of the groups not
// committed yet at their last committed state. Each file is decoded reusing its
// last decoding (decodeReusing), which must equal a fresh decoding.
func TestCommitsDecideAsTheWholeFolder(t *testing.T) {
	s := testDecoder(t)
	cm := func(name, v string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: ns}\ndata: {key: %q}\n", name, v)
	}
	pool := []string{"a: [unterminated\n"}
	for _, n := range []string{"c0", "c1", "c2", "c3"} {
		pool = append(pool, cm(n, "x"), cm(n, "y"),
			fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: ns}\nbogus: 1\n", n))
	}
	pool = append(pool, "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c1, namespace: ns}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c4, namespace: ns}}\n")
	names := []string{"f0.yaml", "f1.yaml", "f2.yaml", "f3.yaml", "g/f4.yaml"}
	for seed := range 6 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		f := newFolder()
		for step := range 150 {
			var ups []fileUpdate
			for _, name := range names {
				if rng.IntN(3) != 0 {
					continue
				}
				switch r := rng.IntN(10); {
				case r == 0:
					ups = append(ups, fileUpdate{file: name, deleted: true})
				case r == 1:
					ups = append(ups, fileUpdate{file: name, state: fileState{unread: Problem{File: name, Message: "cannot read: denied"}}})
				default:
					var ds []string
					for range rng.IntN(4) {
						ds = append(ds, pool[rng.IntN(len(pool))])
					}
					data := []byte(strings.Join(ds, "---\n"))
					var prevFD *fileDecode
					if st := f.files[name]; st != nil {
						prevFD = st.fd
					}
					fd := s.decodeReusing(context.Background(), name, data, prevFD, nil)
					if d := cmp.Diff(decodeView(s.decodeFile(name, data)), decodeView(fd)); d != "" {
						t.Fatalf("seed %d step %d %s: decoding reusing the last differs from a fresh one (-fresh +reusing):\n%s", seed, step, name, d)
					}
					ups = append(ups, fileUpdate{file: name, state: fileState{sum: fd.sum, fd: fd}})
				}
			}
			if len(ups) == 0 {
				continue // nothing changed: no commit (a reload reads nothing)
			}
			// Groups of files that share an object, committed in random order.
			ids := map[string][]objectID{}
			for _, u := range ups {
				ids[u.file] = f.heldIDs(u.file)
				if u.state.fd != nil {
					for _, o := range u.state.fd.objects {
						ids[u.file] = append(ids[u.file], o.id)
					}
					ids[u.file] = append(ids[u.file], u.state.fd.rejected...)
				}
			}
			for _, g := range shuffledGroups(rng, ups, ids) {
				// The reference: the whole folder, with this group's files
				// at their new state and the others as committed.
				after := map[string]*fileState{}
				for k, v := range f.files {
					after[k] = v
				}
				for _, u := range g {
					if u.deleted {
						delete(after, u.file)
					} else {
						st := u.state
						after[u.file] = &st
					}
				}
				wantAccepted, wantProblems := referenceDecide(after, nil, f.accepted)
				f.commit(g)
				if d := cmp.Diff(servedView(wantAccepted), servedView(f.accepted)); d != "" {
					t.Fatalf("seed %d step %d: accepted differ (-whole folder +incremental):\n%s", seed, step, d)
				}
				if d := cmp.Diff(problemStrings(wantProblems), problemStrings(f.problemList())); d != "" {
					t.Fatalf("seed %d step %d: problems differ (-whole folder +incremental):\n%s", seed, step, d)
				}
			}
		}
	}
}

// shuffledGroups partitions ups into the groups of files that share an
// object (ids per file), in random order.
func shuffledGroups(rng *rand.Rand, ups []fileUpdate, ids map[string][]objectID) [][]fileUpdate {
	group := make([]int, len(ups))
	for i := range group {
		group[i] = i
	}
	find := func(i int) int {
		for group[i] != i {
			i = group[i]
		}
		return i
	}
	owner := map[objectID]int{}
	for i, u := range ups {
		for _, id := range ids[u.file] {
			if o, ok := owner[id]; ok {
				group[find(i)] = find(o)
			} else {
				owner[id] = i
			}
		}
	}
	byRoot := map[int][]fileUpdate{}
	for i, u := range ups {
		byRoot[find(i)] = append(byRoot[find(i)], u)
	}
	var out [][]fileUpdate
	for _, g := range byRoot {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b []fileUpdate) int { return strings.Compare(a[0].file, b[0].file) })
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// decodeView is a decoding as text: objects (key, document, line, digest),
// problems, rejected objects and whether it is broken.
func decodeView(fd *fileDecode) []string {
	var out []string
	for _, o := range fd.objects {
		out = append(out, fmt.Sprintf("object %s %s doc %d line %d %x %x", o.id.kind, o.key, o.ref.doc, o.ref.line, o.digest, o.specDigest))
	}
	for _, p := range fd.problems {
		out = append(out, fmt.Sprintf("problem line %d: %s", p.Line, p.Error()))
	}
	for _, id := range fd.rejected {
		out = append(out, fmt.Sprintf("rejected %+v", id))
	}
	return append(out, fmt.Sprintf("broken %v", fd.broken))
}

// reloadTest is a Source over a temporary folder with a reloader driven by
// the test: scan lists and scans; step takes one decoding goroutine's
// message.
type reloadTest struct {
	t   *testing.T
	dir string
	s   *Source
	r   *reloader
}

func newReloadTest(t *testing.T, files map[string]string, beforeDecode func(string)) *reloadTest {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		writeTestFile(t, dir, name, text)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	s, err := New(dir, Options{Logger: slog.New(slog.DiscardHandler), Krt: []krt.CollectionOption{krt.WithStop(stop)}})
	if err != nil {
		t.Fatal(err)
	}
	s.beforeDecode = beforeDecode
	ctx, cancel := context.WithCancel(context.Background())
	rt := &reloadTest{t: t, dir: dir, s: s, r: newReloader(ctx, s)}
	t.Cleanup(func() { cancel(); rt.r.wait() })
	return rt
}

func writeTestFile(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

func (rt *reloadTest) scan() {
	rt.t.Helper()
	sc, err := listManifests(rt.dir)
	if err != nil {
		rt.t.Fatal(err)
	}
	rt.r.scanned(sc)
}

// step takes the next message of a decoding goroutine (bounded wait).
func (rt *reloadTest) step() jobEvent {
	rt.t.Helper()
	select {
	case ev := <-rt.r.events:
		rt.r.received(ev)
		return ev
	case <-time.After(30 * time.Second):
		rt.t.Fatal("no message from a decoding goroutine within 30s")
		return jobEvent{}
	}
}

// settle makes every committed file look read long after it was written,
// so that an unchanged stat stands for unchanged bytes.
func (rt *reloadTest) settle() {
	for _, st := range rt.s.state.files {
		st.readAt = time.Now().Add(time.Hour)
	}
}

func (rt *reloadTest) value(key string) string {
	cm := rt.s.ConfigMaps().GetKey(key)
	if cm == nil {
		return "<absent>"
	}
	return (*cm).Data["key"]
}

func testCM(name, v string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: ns\ndata:\n  key: %s\n", name, v)
}

// TestLargeDecodeHoldsNoOtherFile: while a large file's new version is
// being decoded (held at the gate), another file's change, which shares no
// object with it, is committed and served; the large one follows when its
// decoding ends.
func TestLargeDecodeHoldsNoOtherFile(t *testing.T) {
	gate := make(chan struct{})
	rt := newReloadTest(t, map[string]string{"big.yaml": testCM("big", "v1"), "small.yaml": testCM("small", "v1")},
		func(f string) {
			if f == "big.yaml" {
				<-gate
			}
		})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	writeTestFile(t, rt.dir, "big.yaml", testCM("big", "v2"))
	rt.scan()
	if ev := rt.step(); ev.file != "big.yaml" || ev.fd != nil {
		t.Fatalf("first message %+v, want big.yaml's identities", ev)
	}
	writeTestFile(t, rt.dir, "small.yaml", testCM("small", "v2"))
	rt.scan()
	for rt.value("ns/small") != "v2" {
		if ev := rt.step(); ev.file != "small.yaml" {
			t.Fatalf("message of %s while big.yaml is held", ev.file)
		}
	}
	if v := rt.value("ns/big"); v != "v1" {
		t.Fatalf("big = %s while its decoding is held, want v1", v)
	}
	release()
	if ev := rt.step(); ev.file != "big.yaml" || ev.fd == nil {
		t.Fatalf("message %+v, want big.yaml's decoding", ev)
	}
	if v := rt.value("ns/big"); v != "v2" {
		t.Fatalf("big = %s after its decoding, want v2", v)
	}
}

// TestMoveWaitsForTheLargeFile: an object moved from a small file to a
// large one is never absent: the small file's commit (which drops it)
// waits for the large file's decoding (which declares it), and both are
// committed together, with no delete event. A third file that takes an
// object from the small one waits with them (a chain of shared objects).
func TestMoveWaitsForTheLargeFile(t *testing.T) {
	gate := make(chan struct{})
	rt := newReloadTest(t, map[string]string{
		"big.yaml":   testCM("big", "v1"),
		"small.yaml": testCM("moved", "v1") + "---\n" + testCM("stays", "v1"),
		"other.yaml": testCM("other", "v1"),
	}, func(f string) {
		if f == "big.yaml" {
			<-gate
		}
	})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	events := make(chan string, 64)
	reg := rt.s.ConfigMaps().RegisterBatch(func(evs []krt.Event[*corev1.ConfigMap]) {
		for _, e := range evs {
			events <- e.Event.String() + " " + e.Latest().Name + "=" + e.Latest().Data["key"]
		}
	}, false)
	defer reg.UnregisterHandler()

	writeTestFile(t, rt.dir, "big.yaml", testCM("big", "v1")+"---\n"+testCM("moved", "v2"))
	writeTestFile(t, rt.dir, "small.yaml", "# emptied: moved went to big.yaml, stays to other.yaml\n")
	writeTestFile(t, rt.dir, "other.yaml", testCM("other", "v1")+"---\n"+testCM("stays", "v2"))
	rt.scan()
	// Five messages: the three files' identities and the decodings of
	// small.yaml and other.yaml.
	for range 5 {
		rt.step()
	}
	for _, f := range []string{"small.yaml", "other.yaml"} {
		if p := rt.r.pending[f]; p == nil || !p.ready {
			t.Fatalf("%s: %+v, want decoded and waiting", f, p)
		}
	}
	if moved, stays := rt.value("ns/moved"), rt.value("ns/stays"); moved != "v1" || stays != "v1" {
		t.Fatalf("moved = %s, stays = %s while big.yaml is held, want both v1 (small.yaml and other.yaml wait)", moved, stays)
	}
	release()
	rt.step()
	if moved, stays := rt.value("ns/moved"), rt.value("ns/stays"); moved != "v2" || stays != "v2" {
		t.Fatalf("moved = %s, stays = %s after the three commits, want v2", moved, stays)
	}
	for name, file := range map[string]string{"moved": "big.yaml", "stays": "other.yaml"} {
		if o := rt.s.state.accepted[objectID{kind: "ConfigMap", namespace: "ns", name: name}]; o.ref.file != file {
			t.Errorf("%s is served from %s, want %s", name, o.ref.file, file)
		}
	}
	if ps := rt.s.Problems(); len(ps) != 0 {
		t.Errorf("problems: %v", ps)
	}
	// Events come in order: up to both updates, nothing may be deleted.
	updated := 0
	for updated < 2 {
		select {
		case e := <-events:
			if strings.HasPrefix(e, "delete ") {
				t.Fatalf("%s: a moved object was absent for a moment", e)
			}
			if e == "update moved=v2" || e == "update stays=v2" {
				updated++
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no update events of moved and stays within 30s")
		}
	}
}

// TestOnlyChangedFilesAndDocumentsAreRead: a scan reads only the files
// whose stat changed (or whose stat cannot yet tell), and decodes only the
// documents whose bytes changed; a document moved keeps its decoding (its
// stored object is the same), with its place and its problems' lines
// updated.
func TestOnlyChangedFilesAndDocumentsAreRead(t *testing.T) {
	bad := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: ns}\nbogus: 1\n"
	rt := newReloadTest(t, map[string]string{
		"a.yaml": testCM("a1", "v1") + "---\n" + bad + "---\n" + testCM("a3", "v1"),
		"b.yaml": testCM("b", "v1"),
	}, nil)
	decoded := rt.s.decodedDocs.Load()
	// Just written: the stats cannot tell yet, so both are read again, but
	// their bytes are the same: nothing is decoded.
	rt.scan()
	if n := rt.s.decodedDocs.Load() - decoded; n != 0 || len(rt.r.pending) != 0 {
		t.Fatalf("a scan of unchanged files decoded %d documents (pending %v)", n, rt.r.pending)
	}
	rt.settle()
	a1 := rt.s.ConfigMaps().GetKey("ns/a1")
	// A document inserted first, a3 edited: two documents to decode.
	writeTestFile(t, rt.dir, "a.yaml", testCM("a0", "v1")+"---\n"+testCM("a1", "v1")+"---\n"+bad+"---\n"+testCM("a3", "v2"))
	rt.scan()
	if len(rt.r.pending) != 1 || rt.r.pending["a.yaml"] == nil {
		t.Fatalf("pending %v, want a.yaml alone (b.yaml's stat is settled and unchanged)", rt.r.pending)
	}
	rt.step()
	rt.step()
	if n := rt.s.decodedDocs.Load() - decoded; n != 2 {
		t.Errorf("%d documents decoded, want 2 (the new and the edited)", n)
	}
	if rt.value("ns/a0") != "v1" || rt.value("ns/a3") != "v2" {
		t.Errorf("a0 = %s, a3 = %s; want v1, v2", rt.value("ns/a0"), rt.value("ns/a3"))
	}
	if now := rt.s.ConfigMaps().GetKey("ns/a1"); now == nil || *now != *a1 {
		t.Error("the unchanged document's object was replaced")
	}
	if o := rt.s.state.accepted[objectID{kind: "ConfigMap", namespace: "ns", name: "a1"}]; o.ref.doc != 2 || o.ref.line != 9 {
		t.Errorf("a1 at document %d line %d, want 2 and 9", o.ref.doc, o.ref.line)
	}
	ps := rt.s.Problems()
	if len(ps) != 1 || ps[0].Document != 3 || ps[0].Line != 17 || ps[0].Field != "bogus" {
		t.Errorf("problems %v, want bogus in document 3 at line 17", ps)
	}
}

// TestIDOfIsTheDecodersID: every object a document's decoding accepts or
// rejects is among the identities declaredIDs reads from it without
// validating: the documents of the examples and of check's test folders,
// and variants (no namespace, cluster-scoped kinds with one, Lists,
// unknown kinds, invalid objects).
func TestIDOfIsTheDecodersID(t *testing.T) {
	s := testDecoder(t)
	texts := manifestDocuments(t)
	if len(texts) < 20 {
		t.Fatalf("only %d documents found", len(texts))
	}
	texts = append(texts,
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: n, namespace: x}\n",
		"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: g, namespace: x}\nspec: {controllerName: a.b/c}\n",
		"apiVersion: gateway.networking.k8s.io/v1beta1\nkind: HTTPRoute\nmetadata: {name: r}\nspec: {bogus: 1}\n",
		"apiVersion: networking.istio.io/v1beta1\nkind: DestinationRule\nmetadata: {name: d}\nspec: {host: h}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: x}\nspec: {}\n",
		"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}}\n- {apiVersion: v1, kind: Service, metadata: {name: s, namespace: y}, spec: {bogus: 1}}\n",
		"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
		"kind: Pod\nmetadata: {name: p}\n",
	)
	for _, text := range texts {
		d := document{line: 1, body: []byte(text)}
		r := s.decodeDocument("f.yaml", d)
		declared := s.declaredIDs([]document{d}, nil, nil)
		var got []objectID
		for _, o := range r.objects {
			got = append(got, o.id)
		}
		got = append(got, r.rejected...)
		for _, id := range got {
			if !slices.Contains(declared, id) {
				t.Errorf("decoding gives %+v, which declaredIDs (%+v) misses:\n%s", id, declared, text)
			}
		}
	}
}

// quickAgrees fails when quickIdentity reads an identity from text that
// differs from the one the parse gives (a document that does not parse
// declares nothing, so any answer is on the safe side there). It reports
// whether quickIdentity answered.
func quickAgrees(t *testing.T, s *Source, text string) bool {
	t.Helper()
	apiVersion, kind, ns, name, ok := quickIdentity([]byte(text))
	if !ok {
		return false
	}
	top, parsed := parseDocument(document{line: 1, body: []byte(text)})
	u, isMap := top.(map[string]any)
	if !parsed || !isMap {
		return true
	}
	want, wantOK := s.dec.idOf(u)
	got, gotOK := s.dec.idOfStrings(apiVersion, kind, ns, name)
	if got != want || gotOK != wantOK {
		t.Errorf("quickIdentity reads %+v (%v), the parse %+v (%v):\n%s", got, gotOK, want, wantOK, text)
	}
	return true
}

// TestQuickIdentityAgreesWithParse: on the examples' and check's documents
// and on documents made to mislead a line reader (YAML 1.1 booleans,
// numbers, quotes, comments, flow style, anchors, merge keys, multi-line
// scalars, block scalars holding "name:" lines, repeated keys), every
// identity quickIdentity reads is the parse's; and it answers for most
// real documents, or it would be no shortcut.
func TestQuickIdentityAgreesWithParse(t *testing.T) {
	s := testDecoder(t)
	corpus := manifestDocuments(t)
	answered := 0
	for _, text := range corpus {
		if quickAgrees(t, s, text) {
			answered++
		}
	}
	if answered*10 < len(corpus)*8 {
		t.Errorf("quickIdentity answered for %d of %d documents of the corpus, want 80%%", answered, len(corpus))
	}
	for _, text := range tricky {
		quickAgrees(t, s, text)
	}
}

// tricky are documents that a careless line reader misreads.
var tricky = []string{
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: no\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 1e3\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 0x1F\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"on\"\n  namespace: 'ns'\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a # comment\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: b}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: &m\n  name: a\n",
	"base: &b\n  name: real\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: *b\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: {name: real}\n  namespace: x\n",
	"apiVersion: v1\nkind: ConfigMap\ndescription: \"long\nkind: Secret\"\nmetadata:\n  name: a\n",
	"apiVersion: v1\nkind: ConfigMap\nnote: [a,\nkind, b]\nmetadata:\n  name: a\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    x: |\n      name: fake\n  name: real\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels:\n    name: fake\n  name: real\n  namespace: ns\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n    name: deeper\n  namespace: shallower\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n",
	"apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata:\n  name: a\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nmetadata:\n  name: b\n",
	"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: tab\n",
	"apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf\r\n",
	"apiVersion: v1\nkind: !!str ConfigMap\nmetadata:\n  name: a\n",
	"\"apiVersion\": v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: null\n",
	"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: c\n  namespace: ignored\n",
	"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: x\n",
	"apiVersion: networking.istio.io/v1beta1\nkind: DestinationRule\nmetadata:\n  name: d\n",
	"- a\n- b\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\nkind: Secret\n",
}

// FuzzQuickIdentity: on any text, an identity quickIdentity reads is the
// parse's (go test -fuzz FuzzQuickIdentity ./pilot/pkg/config/file/).
func FuzzQuickIdentity(f *testing.F) {
	for _, text := range tricky {
		f.Add(text)
	}
	s := &Source{}
	f.Fuzz(func(t *testing.T, text string) {
		if s.dec == nil {
			s = testDecoder(t)
		}
		quickAgrees(t, s, text)
	})
}

// manifestDocuments are the documents of every manifest of the examples
// and of pilot-discovery's test folders, as text.
func manifestDocuments(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, root := range []string{"../../../../examples", "../../../cmd/pilot-discovery/testdata"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !manifestExt(p) {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, doc := range splitDocuments(data) {
				out = append(out, string(doc.body))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
