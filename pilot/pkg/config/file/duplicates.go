// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"fmt"
	"slices"
)

// fileObject is one object as declared by one file.
type fileObject struct {
	file string
	id   objectID
}

// pickDeclarations chooses, for every object that valid documents declare,
// the one declaration that is served, and returns a Problem for each other
// declaration of it. candidates are in file path, then document, order; prev
// is what the previous read accepted (nil at a cold start). held reports
// whether a file still declares an object although no valid document of it
// does now: the file cannot be read or is half-written, or its declaration of
// the object was rejected; the object's previous version then stays (load
// keeps it).
//
// The rules, in order:
//   - the established object stays: when prev has the object from file F and
//     F still declares it validly, F's first declaration wins;
//   - when F still declares it but not validly (held), every candidate is
//     refused and the previous version stays served;
//   - otherwise (a cold start, two files new in the same read, or F no
//     longer declares it) the first declaration by file path and document
//     wins: deterministic, independent of the order files were written in.
//
// So a file added later never takes an object over, and when the holder
// stops declaring it (its file deleted, or the document removed) the next
// declaration by path becomes served at that reload: the folder still
// declares the object, and serving what the folder says is the source's job.
// Each refused declaration's Problem is in the refused file and names the
// file and document that hold the served one.
func pickDeclarations(candidates []object, prev map[objectID]object, held func(fileObject) bool) (map[objectID]object, []Problem) {
	// first is each object's first declaration (an index in candidates);
	// more holds the rest, for the few objects declared more than once.
	first := make(map[objectID]int, len(candidates))
	more := map[objectID][]int{}
	for i, c := range candidates {
		if _, seen := first[c.id]; seen {
			more[c.id] = append(more[c.id], i)
		} else {
			first[c.id] = i
		}
	}
	accepted := make(map[objectID]object, len(first))
	var problems []Problem
	for i, c := range candidates {
		id := c.id
		if first[id] != i {
			continue
		}
		if len(more[id]) == 0 {
			if p, ok := prev[id]; !ok || p.ref.file == c.ref.file || !held(fileObject{file: p.ref.file, id: id}) {
				accepted[id] = c // the only declaration: it wins under every rule below
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
			if i == winner {
				continue
			}
			pr := d.ref.problem("", fmt.Sprintf(
				"already defined in %s document %d, %s and this one is refused", w.ref.file, w.ref.doc, why))
			pr.DefinedIn = w.ref.file
			problems = append(problems, pr)
		}
	}
	return accepted, problems
}
