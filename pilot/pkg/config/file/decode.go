// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"

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
