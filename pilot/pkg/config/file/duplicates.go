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

// pickOne chooses which of decls, the valid declarations of one object in
// file path, then document, order, is served, and returns its index (-1
// for none) and a Problem for each other declaration. prev is what was
// accepted before (nil at a cold start, or for an object new to the
// folder). held reports whether a file still declares the object although
// no valid document of it does now: the file cannot be read or is
// half-written, or its declaration of the object was rejected; the
// object's previous version then stays (commit keeps it).
//
// The rules, in order:
//   - the established object stays: when prev is from file F and F still
//     declares it validly, F's first declaration wins;
//   - when F still declares it but not validly (held), every declaration is
//     refused and the previous version stays served;
//   - otherwise (a cold start, two files new at once, or F no longer
//     declares it) the first declaration by file path and document wins:
//     deterministic, independent of the order files were written in.
//
// So a file added later never takes an object over, and when the holder
// stops declaring it (its file deleted, or the document removed) the next
// declaration by path becomes served: the folder still declares the
// object, and serving what the folder says is the source's job. Each
// refused declaration's Problem is in the refused file and names the file
// and document that hold the served one.
func pickOne(decls []object, prev *object, held func(fileObject) bool) (int, []Problem) {
	if len(decls) == 0 {
		return -1, nil
	}
	c := decls[0]
	if len(decls) == 1 && (prev == nil || prev.ref.file == c.ref.file || !held(fileObject{file: prev.ref.file, id: c.id})) {
		return 0, nil // the only declaration: it wins under every rule above
	}
	var problems []Problem
	winner, why := 0, "which is first by path: that one is served"
	if prev != nil {
		if i := slices.IndexFunc(decls, func(o object) bool { return o.ref.file == prev.ref.file }); i >= 0 {
			winner, why = i, "which was loaded first: that one stays served"
		} else if held(fileObject{file: prev.ref.file, id: c.id}) {
			for _, d := range decls {
				pr := d.ref.problem("", fmt.Sprintf(
					"already defined in %s document %d, whose last accepted version stays served: this one is refused",
					prev.ref.file, prev.ref.doc))
				pr.DefinedIn = prev.ref.file
				problems = append(problems, pr)
			}
			return -1, problems
		}
	}
	w := decls[winner]
	for i, d := range decls {
		if i == winner {
			continue
		}
		pr := d.ref.problem("", fmt.Sprintf(
			"already defined in %s document %d, %s and this one is refused", w.ref.file, w.ref.doc, why))
		pr.DefinedIn = w.ref.file
		problems = append(problems, pr)
	}
	return winner, problems
}
