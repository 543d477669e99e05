// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
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
		sum := sha256.Sum256(data)
		if fd, ok := s.decodedBefore(f, sum); ok {
			fds[i] = fd
			continue
		}
		todo = append(todo, fileDocuments{at: i, file: f, sum: sum, docs: splitDocuments(data)})
	}
	s.decodeDocuments(todo)
	for _, fdocs := range todo {
		fds[fdocs.at] = fdocs.merge()
	}
	return fds, unread
}

// decodeFile decodes and validates the documents of file f, unless the
// previous read decoded the very same bytes: decoding and validation depend
// on nothing but the bytes (and the embedded CRDs), so that result is reused
// (its objects marked reused). Checks across files (duplicates) run on
// every read. This makes Run's first read after New, and every reload after
// an edit of one file, cost the files that changed.
func (s *Source) decodeFile(f string, data []byte) *fileDecode {
	sum := sha256.Sum256(data)
	if fd, ok := s.decodedBefore(f, sum); ok {
		return fd
	}
	todo := []fileDocuments{{file: f, sum: sum, docs: splitDocuments(data)}}
	s.decodeDocuments(todo)
	return todo[0].merge()
}

// decodedBefore returns the last read's decoding of file f when it decoded
// bytes of the same SHA-256, its objects marked reused.
func (s *Source) decodedBefore(f string, sum [sha256.Size]byte) (*fileDecode, bool) {
	fd, ok := s.decoded[f]
	if !ok || fd.sum != sum {
		return nil, false
	}
	for i := range fd.objects {
		fd.objects[i].reused = true
	}
	return fd, true
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
	type docAt struct{ file, doc int }
	var first, rest []docAt
	kinds := s.dec.crds.kindNames()
	for i := range todo {
		todo[i].results = make([]fileDecode, len(todo[i].docs))
		for j, d := range todo[i].docs {
			if customKindFirst(d.body, kinds) {
				first = append(first, docAt{i, j})
			} else {
				rest = append(rest, docAt{i, j})
			}
		}
	}
	order := slices.Concat(first, rest)
	decodeEach(len(order), func(k int) {
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
	for i, r := range fdocs.results {
		fdocs.results[i] = fileDecode{} // what is copied can go
		fd.objects = append(fd.objects, r.objects...)
		fd.problems = append(fd.problems, r.problems...)
		fd.rejected = append(fd.rejected, r.rejected...)
		fd.broken = fd.broken || r.broken
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

// decodeEach calls fn(i) for every i in [0, n), on up to GOMAXPROCS
// goroutines, in about the order of i. The caller puts each result at its
// index, so the outcome does not depend on the order the calls ran in.
func decodeEach(n int, fn func(i int)) {
	workers := min(goruntime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}
