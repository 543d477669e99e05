// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// stampServerFields sets on o's object the metadata the API server sets on
// create and update, which manifests do not carry and the controller reads
// (observedGeneration in status, the uid in a shadow Service's owner
// reference):
//
//   - uid: derived from the object's identity (kind, namespace, name), so it
//     is stable across reloads and restarts, unlike a cluster's random one;
//   - generation: 1 when first accepted, then one more each time anything
//     but metadata and status changes, as for custom resources;
//   - creationTimestamp: when first accepted.
//
// prev is the object's last accepted version, or nil. Values that are not
// Kubernetes objects (DestinationRule views) are left alone.
func stampServerFields(o *object, prev *object, now time.Time) {
	m, ok := o.value.(metav1.Object)
	if !ok {
		return
	}
	if o.specDigest == "" {
		o.specDigest = specDigest(o.value)
	}
	if m.GetUID() == "" {
		m.SetUID(stableUID(o.id))
	}
	pm, ok := metaOf(prev)
	if !ok {
		m.SetGeneration(1)
		m.SetCreationTimestamp(metav1.NewTime(now.UTC().Truncate(time.Second)))
		return
	}
	m.SetCreationTimestamp(pm.GetCreationTimestamp())
	g := pm.GetGeneration()
	if prev.specDigest != o.specDigest {
		g++
	}
	m.SetGeneration(g)
}

func metaOf(o *object) (metav1.Object, bool) {
	if o == nil {
		return nil, false
	}
	m, ok := o.value.(metav1.Object)
	return m, ok
}

// stableUID is a UUID-shaped digest of the object's identity: of the text
// fmt's %+v writes for id, built without fmt's reflection
// (TestStableUIDText).
func stableUID(id objectID) types.UID {
	sum := sha256.Sum256([]byte("{group:" + id.group + " kind:" + id.kind + " namespace:" + id.namespace + " name:" + id.name + "}"))
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16]))
}

// specDigest is the SHA-256 of v's JSON without metadata and status: what
// decides a generation bump. For a pointer to a struct (every Kubernetes
// type) that is the JSON of a shallow copy whose metadata and status fields
// are zero: the encoding of a struct is its fields' in a fixed order, so two
// values get the same digest exactly when all their other fields encode the
// same. Anything else is encoded, and its top-level metadata and status
// keys dropped.
func specDigest(v any) string {
	if c, ok := withoutMetaAndStatus(v); ok {
		raw, err := json.Marshal(c)
		if err != nil {
			return ""
		}
		sum := sha256.Sum256(raw)
		return string(sum[:])
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		sum := sha256.Sum256(raw)
		return string(sum[:])
	}
	delete(fields, "metadata")
	delete(fields, "status")
	out, _ := json.Marshal(fields)
	sum := sha256.Sum256(out)
	return string(sum[:])
}

// withoutMetaAndStatus returns a shallow copy of the struct v points to,
// with its fields encoded as "metadata" and "status" set to zero; false
// when v is not a pointer to a struct with a "metadata" field.
func withoutMetaAndStatus(v any) (any, bool) {
	c, _, ok := splitMetaAndStatus(v)
	return c, ok
}

// splitMetaAndStatus is withoutMetaAndStatus, and also returns pointers to
// v's own metadata and status fields (in field order).
func splitMetaAndStatus(v any) (rest any, parts []any, ok bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return nil, nil, false
	}
	cp := reflect.New(rv.Elem().Type()).Elem()
	cp.Set(rv.Elem())
	t := cp.Type()
	found := false
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "metadata" || name == "status" {
			parts = append(parts, rv.Elem().Field(i).Addr().Interface())
			cp.Field(i).SetZero()
			found = found || name == "metadata"
		}
	}
	if !found {
		return nil, nil, false
	}
	return cp.Addr().Interface(), parts, true
}

// objectDigests returns a digest that decides as digestOf(v) does (equal
// exactly when v's JSON is) and specDigest(v), encoding v once: the shallow
// copy specDigest encodes, then v's metadata and status. v's JSON is the
// copy's with the metadata and status fragments in place of the zero ones,
// so the three encodings are equal exactly when v's JSON is. (digestOf
// encodes all of v and specDigest nearly all of it again; a Pod's two
// encodings were a tenth of its decoding.) Values specDigest does not split
// get digestOf and specDigest.
func objectDigests(v any) (digest, spec string) {
	c, parts, ok := splitMetaAndStatus(v)
	if !ok {
		return digestOf(v), specDigest(v)
	}
	rest, err := json.Marshal(c)
	if err != nil {
		return digestOf(v), specDigest(v)
	}
	specSum := sha256.Sum256(rest)
	h := sha256.New()
	h.Write(rest)
	for _, p := range parts {
		b, err := json.Marshal(p)
		if err != nil {
			return digestOf(v), specDigest(v)
		}
		h.Write([]byte{'\n'}) // JSON texts delimit themselves; this only reads better
		h.Write(b)
	}
	return string(h.Sum(nil)), string(specSum[:])
}
