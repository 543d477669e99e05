// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Problem is one reason a manifest, or part of one, was not loaded: a file
// that cannot be read, a document that is not YAML, an unknown kind, an
// unknown field, or a field the API server would reject.
type Problem struct {
	// File is the path relative to the watched folder, with forward slashes.
	File string
	// Document is the number of the document in File among its non-empty
	// YAML documents (separated by "---"), counted from 1 as an editor
	// counts lines; 0 when the problem is with the file as a whole (it
	// cannot be read).
	Document int
	// Line is the 1-based line in File the problem points at: the line of a
	// YAML syntax error, else the document's first line with content (its
	// apiVersion or kind, not the comments above it); 0 if unknown.
	Line int
	// Kind, Namespace and Name identify the object, as far as the document
	// says (empty when it does not get that far).
	Kind, Namespace, Name string
	// Field is the path of the offending field, as the API server writes it
	// (spec.targetPorts[0].number); empty when the problem is not with one field.
	Field string
	// Message says what is wrong, in the words of the API server where it
	// has an equivalent (field.Error's body: "Too many: 9: must have at most 8 items").
	Message string
	// DefinedIn is set on a refused duplicate declaration: the file (a path
	// like File) that holds the declaration served instead, which Message
	// names as "already defined in DefinedIn document N".
	DefinedIn string
}

// Error renders the problem on one line:
//
//	pool.yaml: document 3 (InferencePool llm-namespace/bad): spec.targetPorts: Too many: 9: must have at most 8 items
func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Document > 0 {
		fmt.Fprintf(&b, ": document %d", p.Document)
	}
	if p.Kind != "" || p.Name != "" {
		b.WriteString(" (")
		b.WriteString(cmp.Or(p.Kind, "object"))
		if id := p.objectName(); id != "" {
			b.WriteString(" " + id)
		}
		b.WriteString(")")
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// objectName is "namespace/name", or "name" when there is no namespace.
func (p Problem) objectName() string {
	if p.Namespace == "" {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}

// docRef locates a document: file, number (from 1), first line with
// content; and the object it declares, once known.
type docRef struct {
	file                  string
	doc                   int
	line                  int
	kind, namespace, name string
}

func (r docRef) problem(fld, msg string) Problem {
	return Problem{File: r.file, Document: r.doc, Line: r.line, Kind: r.kind, Namespace: r.namespace,
		Name: r.name, Field: fld, Message: msg}
}

// fieldProblems turns the API server's field errors into Problems.
func (r docRef) fieldProblems(errs field.ErrorList) []Problem {
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		fld := e.Field
		if fld == "<nil>" { // field.Invalid(nil, ...): the object as a whole
			fld = ""
		}
		out = append(out, r.problem(fld, e.ErrorBody()))
	}
	return out
}

// sortProblems orders problems by file, document, then the rest of the text,
// so the order does not depend on map iteration.
func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Document, b.Document),
			cmp.Compare(a.Line, b.Line), strings.Compare(a.Error(), b.Error()))
	})
}
