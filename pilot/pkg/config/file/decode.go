// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/infermesh/infermesh/pkg/kube"
)

// objectID is what the API server keys an object by: group, kind, namespace
// (empty for cluster-scoped kinds) and name.
type objectID struct {
	group, kind, namespace, name string
}

// object is one accepted object, ready for its collection.
type object struct {
	id objectID
	// coll names the collection the object goes to; empty for kinds that are
	// accepted and ignored (Deployments, TCPRoutes, ...).
	coll string
	// key is the object's key in its collection.
	key string
	// value is what the collection stores (*corev1.Pod, kube.DestinationRule, ...).
	value any
	// digest is equal exactly when value's JSON is: equal digests mean no
	// change (digestOf; objectDigests for built-in kinds).
	digest string
	// specDigest is value without metadata and status (stampServerFields).
	specDigest string
	ref        docRef
	// reused: the value comes from an earlier read's decoding of the same
	// bytes (Source.decodeFile) and may be stored in a collection already.
	reused bool
}

// decoder turns documents into objects and problems. It holds no state
// between reloads.
type decoder struct {
	crds crdSchemas
}

// decodeResult is what one document yields: accepted objects, problems, and
// the objects it declared but that were rejected (so an earlier accepted
// version of them stays, as after a rejected apply).
type decodeResult struct {
	objects  []object
	problems []Problem
	rejected []objectID
}

func (r *decodeResult) reject(id objectID, ps ...Problem) {
	r.problems = append(r.problems, ps...)
	if id.name != "" {
		r.rejected = append(r.rejected, id)
	}
}

// decodeJSON decodes one document, already converted to JSON. A kind: List
// (apiVersion v1) is expanded into its items.
func (d *decoder) decodeJSON(ref docRef, data []byte, res *decodeResult) {
	var top any
	if err := utiljson.Unmarshal(data, &top); err != nil {
		res.problems = append(res.problems, ref.problem("", "invalid JSON: "+err.Error()))
		return
	}
	d.decodeValue(ref, top, data, res)
}

// decodeValue decodes one document's generic value (utiljson.Unmarshal's),
// whose JSON text is data, or nil when the document did not go through
// JSON (shortWay).
func (d *decoder) decodeValue(ref docRef, top any, data []byte, res *decodeResult) {
	if top == nil {
		return // "null": an empty document
	}
	u, ok := top.(map[string]any)
	if !ok {
		res.problems = append(res.problems, ref.problem("", fmt.Sprintf("want an object, got %T", top)))
		return
	}
	if u["apiVersion"] == "v1" && u["kind"] == "List" {
		items, ok := u["items"].([]any)
		if !ok && u["items"] != nil {
			res.problems = append(res.problems, ref.problem("items", "Invalid value: must be a list"))
			return
		}
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				res.problems = append(res.problems, ref.problem(fmt.Sprintf("items[%d]", i), "Invalid value: must be an object"))
				continue
			}
			d.decodeObject(ref, m, nil, res)
		}
		return
	}
	d.decodeObject(ref, u, data, res)
}

// decodeObject sends one object to the decoder of its kind. raw is u's
// JSON text when the document is that one object (nil for a List's item).
func (d *decoder) decodeObject(ref docRef, u map[string]any, raw []byte, res *decodeResult) {
	apiVersion, _ := u["apiVersion"].(string)
	kind, _ := u["kind"].(string)
	ref.kind = kind
	if md, ok := u["metadata"].(map[string]any); ok {
		ref.namespace, _ = md["namespace"].(string)
		ref.name, _ = md["name"].(string)
	}
	if apiVersion == "" || kind == "" {
		missing := "apiVersion"
		if kind == "" {
			missing = "kind"
		}
		res.problems = append(res.problems, ref.problem(missing, "Required value: every manifest needs apiVersion and kind"))
		return
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		res.problems = append(res.problems, ref.problem("apiVersion", fmt.Sprintf("Invalid value: %q: %v", apiVersion, err)))
		return
	}
	gvk := gv.WithKind(kind)
	switch {
	case d.crds[gvk] != nil:
		d.decodeCustom(ref, d.crds[gvk], u, res)
	case isDestinationRule(gvk):
		decodeDestinationRule(ref, u, res)
	case scheme.Scheme.Recognizes(gvk):
		decodeBuiltin(ref, gvk, u, raw, res)
	default:
		res.problems = append(res.problems, ref.problem("",
			fmt.Sprintf("unknown kind %q of apiVersion %q: not a built-in kind, a served version of the Gateway API or InferencePool CRDs, or an Istio DestinationRule", kind, apiVersion)))
	}
}

// idOf is the identity the decoders give object u (decodeCustom,
// decodeBuiltin, decodeDestinationRule: group, kind, the namespace they
// default, name), read without decoding or validating it; false when u has
// none (no apiVersion or kind, or a kind no decoder takes). It tells which
// objects a file is about to declare before its documents are validated
// (TestIDOfIsTheDecodersID).
func (d *decoder) idOf(u map[string]any) (objectID, bool) {
	apiVersion, _ := u["apiVersion"].(string)
	kind, _ := u["kind"].(string)
	var namespace, name string
	if md, ok := u["metadata"].(map[string]any); ok {
		namespace, _ = md["namespace"].(string)
		name, _ = md["name"].(string)
	}
	return d.idOfStrings(apiVersion, kind, namespace, name)
}

// idOfStrings is idOf of an object with these apiVersion, kind and
// metadata.
func (d *decoder) idOfStrings(apiVersion, kind, namespace, name string) (objectID, bool) {
	if apiVersion == "" || kind == "" {
		return objectID{}, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return objectID{}, false
	}
	gvk := gv.WithKind(kind)
	var namespaced bool
	switch {
	case d.crds[gvk] != nil:
		namespaced = d.crds[gvk].namespaced
	case isDestinationRule(gvk):
		gvk.Group, gvk.Kind, namespaced = kube.DestinationRuleGVR.Group, "DestinationRule", true
	case scheme.Scheme.Recognizes(gvk):
		namespaced = builtinKinds[gvk].namespaced
	default:
		return objectID{}, false
	}
	id := objectID{group: gvk.Group, kind: gvk.Kind, name: name}
	if namespaced {
		id.namespace = cmp.Or(namespace, metav1.NamespaceDefault)
	}
	return id, true
}

// digestOf is the SHA-256 of v's JSON, the change detector between reloads
// (encoding/json sorts map keys, so equal values give equal text). A hash,
// not the text, so a folder's objects are not held twice.
func digestOf(v any) string {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		return fmt.Sprintf("unencodable %T: %v", v, err) // never equal to a real digest
	}
	sum := sha256.Sum256(b.Bytes())
	return string(sum[:])
}

// namespacedKey is the krt key of a Kubernetes object: "namespace/name", or
// "name" when cluster-scoped.
func namespacedKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// quickIdentity reads a document's apiVersion, kind, metadata.name and
// metadata.namespace from its lines, without parsing it, when the document
// has the plain block shape manifests mostly have: top-level keys at column
// 0, a block "metadata:" whose own keys share one indentation, and each of
// those four values (namespace may be absent) a plain or simply quoted
// scalar that YAML reads as that very string (safeScalar). Anything else
// (flow style, tabs, anchors, merge keys, a List, a repeated key, ...)
// gives false, and the caller parses the document. It tells, in
// microseconds, what a file of ten thousand documents declares
// (declaredIDs); TestQuickIdentityAgreesWithParse and
// FuzzQuickIdentity hold it to the parse's answer.
func quickIdentity(body []byte) (apiVersion, kind, namespace, name string, ok bool) {
	var seen [4]bool // apiVersion, kind, name, namespace
	inMeta, metaIndent, sawMeta := false, -1, false
	valueIndent := -1 // the indentation of the line of a value just read
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		trimmed := bytes.TrimLeft(line, " ")
		if len(trimmed) == 0 {
			continue
		}
		if valueIndent >= 0 && len(line)-len(trimmed) > valueIndent {
			return "", "", "", "", false // the value may go on over this line
		}
		valueIndent = -1
		if trimmed[0] == '#' {
			continue
		}
		if bytes.IndexByte(line, '\t') >= 0 {
			return "", "", "", "", false
		}
		indent := len(line) - len(trimmed)
		if inMeta && metaIndent < 0 && indent > 0 {
			metaIndent = indent // metadata's first line sets its keys' indentation
		}
		key, value, isKey := bytes.Cut(trimmed, []byte(":"))
		if !isKey || !plainKey(key) || len(value) > 0 && value[0] != ' ' {
			if indent == 0 || inMeta && indent == metaIndent {
				return "", "", "", "", false // not a simple "key: value" where one is needed
			}
			continue // deeper: labels, annotations, spec ...
		}
		value = bytes.TrimLeft(value, " ")
		if (indent == 0 || inMeta && indent == metaIndent) && !closedOnTheLine(value) {
			// A quoted or flow value that may go on over the next lines,
			// where a line at this indentation would not be a key, or an
			// anchor, alias or tag: parse the document.
			return "", "", "", "", false
		}
		switch {
		case indent == 0:
			inMeta = false
			var slot int
			switch string(key) {
			case "apiVersion":
				slot = 0
			case "kind":
				slot = 1
			case "metadata":
				if len(value) > 0 || sawMeta {
					return "", "", "", "", false
				}
				inMeta, sawMeta = true, true
				continue
			default:
				continue
			}
			s, safe := safeScalar(value)
			if !safe || seen[slot] {
				return "", "", "", "", false
			}
			seen[slot], valueIndent = true, indent
			if slot == 0 {
				apiVersion = s
			} else {
				kind = s
			}
		case inMeta:
			if indent < metaIndent {
				return "", "", "", "", false
			}
			if indent > metaIndent {
				continue
			}
			slot := 0
			switch string(key) {
			case "name":
				slot = 2
			case "namespace":
				slot = 3
			default:
				continue
			}
			s, safe := safeScalar(value)
			if !safe || seen[slot] {
				return "", "", "", "", false
			}
			seen[slot], valueIndent = true, indent
			if slot == 2 {
				name = s
			} else {
				namespace = s
			}
		}
	}
	if !seen[0] || !seen[1] || !seen[2] || kind == "List" {
		return "", "", "", "", false
	}
	return apiVersion, kind, namespace, name, true
}

// closedOnTheLine reports whether a value written after "key: " ends on its
// line: empty, a block scalar indicator, or a scalar or flow collection
// that does not open a quote or bracket it leaves open (checked by its last
// character), and no anchor, alias or tag.
func closedOnTheLine(v []byte) bool {
	if len(v) == 0 {
		return true
	}
	last := v[len(v)-1]
	switch v[0] {
	case '"', '\'':
		return len(v) >= 2 && last == v[0]
	case '{':
		return last == '}'
	case '[':
		return last == ']'
	case '&', '*', '!':
		return false
	}
	return true
}

// plainKey: letters, digits, "_", "." and "-", starting with a letter.
func plainKey(k []byte) bool {
	if len(k) == 0 || !isLetter(k[0]) {
		return false
	}
	for _, c := range k {
		if !isLetter(c) && !isDigit(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// safeScalar is v as the string YAML reads, when it surely reads a string:
// a plain scalar of letters, digits, ".", "/", "-" and "_" that starts with
// a letter, ends with a letter or digit and is none of YAML 1.1's booleans
// and nulls; or such characters (any first) in double or single quotes.
func safeScalar(v []byte) (string, bool) {
	if n := len(v); n >= 2 && (v[0] == '"' && v[n-1] == '"' || v[0] == '\'' && v[n-1] == '\'') {
		in := v[1 : n-1]
		if len(in) == 0 {
			return "", false
		}
		for _, c := range in {
			if !isLetter(c) && !isDigit(c) && c != '.' && c != '/' && c != '-' && c != '_' {
				return "", false
			}
		}
		return string(in), true
	}
	if len(v) == 0 || !isLetter(v[0]) || !isLetter(v[len(v)-1]) && !isDigit(v[len(v)-1]) {
		return "", false
	}
	for _, c := range v {
		if !isLetter(c) && !isDigit(c) && c != '.' && c != '/' && c != '-' && c != '_' {
			return "", false
		}
	}
	switch strings.ToLower(string(v)) {
	case "y", "n", "yes", "no", "true", "false", "on", "off", "null":
		return "", false
	}
	return string(v), true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
