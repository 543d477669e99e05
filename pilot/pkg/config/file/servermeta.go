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
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// stampServerFields sets on o's object the metadata the API server sets on
// create and update, which manifests do not carry and the controller reads
// (observedGeneration in status, the uid in a shadow Service's owner
// reference, creationTimestamp in precedence):
//
//   - uid: derived from the object's identity (kind, namespace, name), so it
//     is stable across reloads and restarts, unlike a cluster's random one;
//   - generation: 1 when first accepted, then one more each time anything
//     but metadata and status changes, as for custom resources;
//   - creationTimestamp: the one the manifest states, else
//     unstatedCreationTimestamp (creationTimestamp).
//
// prev is the object's last accepted version, or nil. Values that are not
// Kubernetes objects (DestinationRule views) are left alone.
func stampServerFields(o *object, prev *object) {
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
	m.SetCreationTimestamp(creationTimestamp(m.GetCreationTimestamp()))
	pm, ok := metaOf(prev)
	if !ok {
		m.SetGeneration(1)
		return
	}
	g := pm.GetGeneration()
	if prev.specDigest != o.specDigest {
		g++
	}
	m.SetGeneration(g)
}

// unstatedCreationTimestamp is the creationTimestamp of an object whose
// manifest states none: 9999-12-31T23:59:59Z, the latest time a manifest
// can state (RFC 3339 has four-digit years).
//
// Where the Gateway API gives precedence to the oldest object (conflicting
// HTTPRoute and GRPCRoute rules, BackendTLSPolicies on one target,
// ListenerSet listeners), a cluster compares the times objects were
// created. A folder has no such history: the time of a load differs after
// every restart and between replicas, and a file's mtime differs between
// replicas that mount one ConfigMap (the kubelet writes the files when it
// mounts them) and moves on every edit. So an object's creation time in
// file mode comes from its manifest alone: the creationTimestamp it states
// (one exported from a cluster with kubectl get -o yaml keeps its own), or
// this constant. Objects that state none tie among themselves, and the
// Gateway API breaks the tie by namespace, then name; an object that
// states one is older than every object that does not. The outcome is the
// same on every replica, after every restart, whatever order files are
// read or written in, and it is what status -f and check -f show.
var unstatedCreationTimestamp = metav1.NewTime(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))

// creationTimestamp is the creationTimestamp file mode gives an object
// whose manifest states stated (zero when it states none, or null).
func creationTimestamp(stated metav1.Time) metav1.Time {
	if stated.IsZero() {
		return unstatedCreationTimestamp
	}
	return metav1.NewTime(stated.UTC())
}

// creationTimestampError is the problem of a metadata.creationTimestamp in
// u that is not an RFC 3339 time (metav1.Time's format), named by its
// field rather than as all of metadata, since file mode reads it
// (creationTimestamp); nil when u states none or a valid one.
func creationTimestampError(u map[string]any) *field.Error {
	md, _ := u["metadata"].(map[string]any)
	v, ok := md["creationTimestamp"]
	if !ok || v == nil {
		return nil
	}
	if s, ok := v.(string); ok {
		if _, err := time.Parse(time.RFC3339, s); err == nil {
			return nil
		}
	}
	return field.Invalid(field.NewPath("metadata", "creationTimestamp"), v, `want an RFC 3339 time, such as "2024-05-01T10:00:00Z"`)
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
