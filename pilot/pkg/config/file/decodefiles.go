// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// fileDecode is what one file's bytes decode to: its documents' objects and
// problems, the objects it declared that were rejected, and whether a
// document is not YAML.
type fileDecode struct {
	sum      [sha256.Size]byte
	objects  []object
	problems []Problem
	rejected []objectID
	broken   bool
	// docs are each document's share of the above, in document order: the
	// next decoding of the file reuses a document whose bytes are the same
	// (decodeReusing).
	docs []docSpan
}

// docSpan is one document's share of its file's decoding: the SHA-256 of
// its bytes, its first line, and how many objects, problems and rejected
// objects it yielded (they follow those of the documents before it).
type docSpan struct {
	sum                         [sha256.Size]byte
	line                        int
	objects, problems, rejected int32
	broken                      bool
}

// readFiles reads each of files and decodes it (decodeFile); a file that
// cannot be read has no decoding, and a problem at its index in unread.
//
// The documents of every file that needs decoding are decoded together, on
// every core, custom resources first (customKindFirst): validating them (the
// OpenAPI schema, CEL) makes most of start-up's garbage, while the rest (the
// Pods of a folder of model servers) is most of what stays live; decoding
// them first keeps the live heap small while the garbage is made, so each
// collection of it is cheap. The outcome does not depend on the order: each
// result is kept at its document's place.
func (s *Source) readFiles(files []string) (fds []*fileDecode, unread []Problem) {
	fds = make([]*fileDecode, len(files))
	unread = make([]Problem, len(files))
	var todo []fileDocuments
	for i, f := range files {
		data, err := os.ReadFile(filepath.Join(s.dir, filepath.FromSlash(f)))
		if err != nil {
			unread[i] = Problem{File: f, Message: "cannot read: " + err.Error()}
			continue
		}
		todo = append(todo, fileDocuments{at: i, file: f, sum: sha256.Sum256(data), docs: splitDocuments(data)})
	}
	s.decodeDocuments(todo)
	for _, fdocs := range todo {
		fds[fdocs.at] = fdocs.merge()
	}
	return fds, unread
}

// decodeFile decodes and validates the documents of file f.
func (s *Source) decodeFile(f string, data []byte) *fileDecode {
	return s.decodeReusing(context.Background(), f, data, nil, nil)
}

// decodeReusing decodes file f's new bytes, data, given its last decoding
// prev (nil if none): a document whose bytes are those of a document of
// prev is not decoded again, its results are prev's, moved to its place
// (decoding and validation depend on nothing but a document's bytes and
// the embedded CRDs; only a YAML syntax error's message names a line of the
// file, and such documents are parsed again), its objects marked reused. So an edit of one
// document of a file of ten thousand costs one document. Before any
// document is validated, declared (when not nil) gets the identities the
// new bytes declare (declaredIDs): what the decoding will accept or
// reject is among them. It returns nil when ctx ends first.
func (s *Source) decodeReusing(ctx context.Context, f string, data []byte, prev *fileDecode, declared func([]objectID)) *fileDecode {
	fdocs := fileDocuments{file: f, sum: sha256.Sum256(data), docs: splitDocuments(data)}
	var kept []int // per document, the index of the same document in prev, or -1
	if prev != nil && len(prev.docs) > 0 {
		at := make(map[[sha256.Size]byte]int, len(prev.docs))
		for i := len(prev.docs) - 1; i >= 0; i-- {
			// Not a document that is not YAML: its message names its line
			// in the file, and parsing it again costs next to nothing.
			if !prev.docs[i].broken {
				at[prev.docs[i].sum] = i // the first of equal documents
			}
		}
		kept = make([]int, len(fdocs.docs))
		for i, d := range fdocs.docs {
			kept[i] = -1
			if j, ok := at[sha256.Sum256(d.body)]; ok {
				kept[i] = j
			}
		}
	}
	if declared != nil {
		declared(s.declaredIDs(fdocs.docs, kept, prev))
		if s.beforeDecode != nil {
			s.beforeDecode(f)
		}
	}
	todo := []fileDocuments{fdocs}
	if !s.decodeDocumentsExcept(ctx, reloadWorkers(), todo, func(_, doc int) bool { return kept != nil && kept[doc] >= 0 }) {
		return nil
	}
	if kept != nil {
		spans := prev.spanStarts()
		for i, j := range kept {
			if j >= 0 {
				todo[0].results[i] = prev.docResult(j, spans[j], f, fdocs.docs[i])
			}
		}
	}
	return todo[0].merge()
}

// declaredIDs returns the identities that docs declare: for document i
// with kept[i] >= 0 (kept may be nil), those document kept[i] of prev
// accepted or rejected; for every other, what decoder.idOf makes of its
// objects (a List's items), read from its lines (quickIdentity) or else
// parsed, but not validated. A document that does
// not parse declares nothing: its file is broken, and keeps what it last
// declared.
func (s *Source) declaredIDs(docs []document, kept []int, prev *fileDecode) []objectID {
	var ids []objectID
	var spans []spanStart
	for i, d := range docs {
		if kept != nil && kept[i] >= 0 {
			if spans == nil {
				spans = prev.spanStarts()
			}
			j, st := kept[i], spans[kept[i]]
			for _, o := range prev.objects[st.objects : st.objects+prev.docs[j].objects] {
				ids = append(ids, o.id)
			}
			ids = append(ids, prev.rejected[st.rejected:st.rejected+prev.docs[j].rejected]...)
			continue
		}
		if apiVersion, kind, ns, name, ok := quickIdentity(d.body); ok {
			if id, ok := s.dec.idOfStrings(apiVersion, kind, ns, name); ok {
				ids = append(ids, id)
			}
			continue
		}
		top, ok := parseDocument(d)
		if !ok {
			continue
		}
		u, ok := top.(map[string]any)
		if !ok {
			continue
		}
		if u["apiVersion"] == "v1" && u["kind"] == "List" {
			items, _ := u["items"].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					if id, ok := s.dec.idOf(m); ok {
						ids = append(ids, id)
					}
				}
			}
			continue
		}
		if id, ok := s.dec.idOf(u); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// parseDocument is the generic value of a document, as decodeDocument
// reads it, and false when it is not YAML.
func parseDocument(d document) (any, bool) {
	if top, ok := shortWay(d.body); ok {
		return top, true
	}
	j, _, err := toJSON(d)
	if err != nil {
		return nil, false
	}
	var top any
	if err := utiljson.Unmarshal(j, &top); err != nil {
		return nil, false
	}
	return top, true
}

// reloadWorkers is how many goroutines decode one file's changed
// documents during Run: all cores but one (at least one), so that while a
// tenant's large file is validated, the rest of the control plane
// (another file's commit, the controller, translation and pushes) keeps a
// core. New, which nothing waits beside, uses every core.
func reloadWorkers() int { return max(1, goruntime.GOMAXPROCS(0)-1) }

// spanStart is where a document's share starts in a fileDecode's objects,
// problems and rejected.
type spanStart struct{ objects, problems, rejected int32 }

// spanStarts returns, per document of fd, where its share starts.
func (fd *fileDecode) spanStarts() []spanStart {
	out := make([]spanStart, len(fd.docs))
	var at spanStart
	for i, d := range fd.docs {
		out[i] = at
		at.objects += d.objects
		at.problems += d.problems
		at.rejected += d.rejected
	}
	return out
}

// docResult is document j of fd (its share starting at st), moved to the
// place of document d of file f: the same objects (marked reused, since
// their values may be stored), problems and rejected objects, with the
// document index and lines of d.
func (fd *fileDecode) docResult(j int, st spanStart, f string, d document) fileDecode {
	span := fd.docs[j]
	shift := d.line - span.line
	r := fileDecode{sum: span.sum, broken: span.broken}
	if span.objects > 0 {
		r.objects = slices.Clone(fd.objects[st.objects : st.objects+span.objects])
		for k := range r.objects {
			o := &r.objects[k]
			o.ref.file, o.ref.doc, o.ref.line = f, d.index+1, o.ref.line+shift
			o.reused = true
		}
	}
	if span.problems > 0 {
		r.problems = slices.Clone(fd.problems[st.problems : st.problems+span.problems])
		for k := range r.problems {
			p := &r.problems[k]
			p.File, p.Document = f, d.index+1
			if p.Line > 0 {
				p.Line += shift
			}
		}
	}
	if span.rejected > 0 {
		r.rejected = slices.Clone(fd.rejected[st.rejected : st.rejected+span.rejected])
	}
	return r
}

// fileDocuments is a file's documents and, once decoded, each one's result.
type fileDocuments struct {
	at      int // the file's index in readFiles' files
	file    string
	sum     [sha256.Size]byte
	docs    []document
	results []fileDecode
}

// decodeDocuments decodes the documents of every file of todo on up to
// GOMAXPROCS goroutines, custom resources first (see readFiles), and puts
// each result at its document's index.
func (s *Source) decodeDocuments(todo []fileDocuments) {
	s.decodeDocumentsExcept(context.Background(), goruntime.GOMAXPROCS(0), todo, func(int, int) bool { return false })
}

// decodeDocumentsExcept is decodeDocuments on up to workers goroutines,
// leaving out (their results zero) the documents skip names by file and
// document index. It reports false, leaving the results incomplete, when
// ctx ends first.
func (s *Source) decodeDocumentsExcept(ctx context.Context, workers int, todo []fileDocuments, skip func(file, doc int) bool) bool {
	type docAt struct{ file, doc int }
	var first, rest []docAt
	kinds := s.dec.crds.kindNames()
	for i := range todo {
		todo[i].results = make([]fileDecode, len(todo[i].docs))
		for j, d := range todo[i].docs {
			switch {
			case skip(i, j):
			case customKindFirst(d.body, kinds):
				first = append(first, docAt{i, j})
			default:
				rest = append(rest, docAt{i, j})
			}
		}
	}
	order := slices.Concat(first, rest)
	s.decodedDocs.Add(int64(len(order)))
	return decodeEach(ctx, workers, len(order), func(k int) {
		fd := &todo[order[k].file]
		fd.results[order[k].doc] = s.decodeDocument(fd.file, fd.docs[order[k].doc])
	})
}

// merge gathers the documents' results, in document order.
func (fdocs *fileDocuments) merge() *fileDecode {
	fd := &fileDecode{sum: fdocs.sum}
	n := 0
	for _, r := range fdocs.results {
		n += len(r.objects)
	}
	if n > 0 {
		fd.objects = make([]object, 0, n)
	}
	fd.docs = make([]docSpan, len(fdocs.results))
	for i, r := range fdocs.results {
		fdocs.results[i] = fileDecode{} // what is copied can go
		fd.objects = append(fd.objects, r.objects...)
		fd.problems = append(fd.problems, r.problems...)
		fd.rejected = append(fd.rejected, r.rejected...)
		fd.broken = fd.broken || r.broken
		d := fdocs.docs[i]
		fd.docs[i] = docSpan{sum: r.sum, line: d.line, objects: int32(len(r.objects)),
			problems: int32(len(r.problems)), rejected: int32(len(r.rejected)), broken: r.broken}
		if r.sum == ([sha256.Size]byte{}) {
			fd.docs[i].sum = sha256.Sum256(d.body)
		}
	}
	fdocs.results = nil
	return fd
}

// customKindFirst reports whether a document says, on a top-level line
// "kind: K", that it is of a kind of the embedded CRDs. It only orders the
// work: a document it misjudges decodes all the same.
func customKindFirst(body []byte, kinds map[string]bool) bool {
	for line := body; len(line) > 0; {
		next := len(line)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			next = i + 1
		}
		if v, ok := bytes.CutPrefix(line[:next], []byte("kind:")); ok {
			v = bytes.Trim(bytes.TrimSpace(v), `"'`)
			return kinds[string(v)]
		}
		line = line[next:]
	}
	return false
}

// decodeDocument decodes and validates one document of file f. It reads
// nothing but the document and the decoder (whose CRDs are built once,
// under a sync.Once), so documents decode concurrently.
func (s *Source) decodeDocument(f string, d document) fileDecode {
	fd := s.decodeDocumentOnly(f, d)
	fd.sum = sha256.Sum256(d.body) // here, on every core
	return fd
}

func (s *Source) decodeDocumentOnly(f string, d document) fileDecode {
	ref := docRef{file: f, doc: d.index + 1, line: d.first}
	var res decodeResult
	if top, ok := shortWay(d.body); ok {
		s.dec.decodeValue(ref, top, nil, &res)
	} else {
		j, line, err := toJSON(d)
		if err != nil {
			ref.line = line
			return fileDecode{problems: []Problem{ref.problem("", err.Error())}, broken: true}
		}
		s.dec.decodeJSON(ref, j, &res)
	}
	return fileDecode{objects: res.objects, problems: res.problems, rejected: res.rejected}
}

// decodeEach calls fn(i) for every i in [0, n), on up to workers
// goroutines, in about the order of i. The caller puts each result at its
// index, so the outcome does not depend on the order the calls ran in. It
// stops early, reporting false, when ctx ends.
func decodeEach(ctx context.Context, workers, n int, fn func(i int)) bool {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			if ctx.Err() != nil {
				return false
			}
			fn(i)
		}
		return ctx.Err() == nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
	return ctx.Err() == nil
}
