// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package file is the configuration source of `pilot-discovery discovery -f
// DIR`: it reads Kubernetes manifests from a folder and serves them as krt
// collections of the same element types as *kube.Client's (Pods, Services,
// Gateways, InferencePools, DestinationRules, ...), so the control plane runs
// the same pipeline with no cluster. The aim is that the collections hold
// what an API server would have stored had the folder been applied with
// `kubectl apply --validate=strict -f DIR -R`.
//
// # Inputs
//
// Every *.yaml, *.yml and *.json file in the folder and its subfolders,
// skipping names that start with "." (a mounted ConfigMap's ..data and
// ..<timestamp> folders; its top-level symlinks are read instead) and not
// following symlinks to folders. Files hold one or more YAML documents
// separated by "---"; a `kind: List` is expanded. YAML is read as kubectl
// reads it (sigs.k8s.io/yaml: YAML 1.1 scalars, so an unquoted n or no is a
// boolean; duplicate keys are errors). Most documents take a shorter way to
// the same values, without sigs.k8s.io/yaml's JSON round trip: a reader of
// the block style most manifests have (blockDocument), else yaml v3's node
// tree read with YAML 1.1's rules (nodeDocument); anything either is unsure
// of (tags, anchors, floats, a syntax error, ...) takes the long way, so
// every problem text is the long way's. Tests compare the ways on
// generated documents, and a fuzz target does on any.
//
// # What is checked, and how
//
//   - Gateway API (standard channel, every served version) and InferencePool
//     (inference.networking.k8s.io/v1): against the CRDs of the module
//     versions in go.mod, embedded in crds/ by hack/update-crds.sh, with the
//     API server's own code (k8s.io/apiextensions-apiserver): unknown fields
//     (pruning) are errors, then structural defaulting, ObjectMeta validation,
//     OpenAPI schema validation, list-type invariants and the CEL rules
//     (x-kubernetes-validations). Messages are the API server's field errors.
//     Every served version is stored as the v1 Go type: these CRDs convert
//     with strategy None.
//   - Options.GatewayAPIChannel ChannelExperimental checks Gateway API
//     kinds against the experimental channel's CRDs instead (crds-experimental/,
//     the same kinds, from the same module version), so experimental
//     fields such as Listener.filters are accepted and validated.
//   - infermesh.io ExternalProcessors: against the chart's own CRD
//     (manifests/charts/infermesh/crds, copied to owncrds/), the same way.
//   - Built-in kinds of the client-go scheme: strict decoding (unknown and
//     duplicate fields are errors). Namespaces, Pods, Services,
//     EndpointSlices, ConfigMaps and Secrets are stored; every other built-in
//     kind (Deployments, ...) is accepted and ignored. k8s.io/kubernetes,
//     which holds the built-in defaulting and validation, cannot be imported,
//     so only this is reproduced, by hand: ObjectMeta validation (Service
//     names are DNS-1035 labels, Namespace names DNS labels, others DNS
//     subdomains); Service defaults (type ClusterIP, sessionAffinity None,
//     port protocol TCP, targetPort = port, externalTrafficPolicy and
//     internalTrafficPolicy Cluster where the API server sets them) and port
//     checks (number and targetPort in range or a valid port name, protocol
//     TCP/UDP/SCTP, names DNS labels, required when several and unique); EndpointSlice defaults (port name "", protocol
//     TCP) and addressType and port checks; Pod container port protocol TCP;
//     Secret stringData merged into data and type Opaque; the Namespace label
//     kubernetes.io/metadata.name. Anything else a real API server would
//     reject in a built-in object loads here, and so does an object in a
//     namespace no file declares (the API server's NamespaceLifecycle
//     admission would refuse it; folders often leave Namespaces out).
//   - Istio DestinationRules (networking.istio.io v1, v1beta1, v1alpha3):
//     Istio's CRD is not a dependency, so only unknown top-level and metadata
//     fields, ObjectMeta, and what kube.DestinationRuleFromUnstructured reads
//     are checked.
//   - Any other kind is a problem ("unknown kind").
//
// A namespaced object without a namespace is in "default", as kubectl puts
// it; a cluster-scoped one (Namespace, GatewayClass) loses any namespace it
// names, as the API server drops it. Server-set metadata is emulated where
// the controller reads it (servermeta.go): a uid stable per object (a
// stated one is kept), a generation of 1 bumped on every change outside
// metadata and status; resourceVersion is not set.
//
// # Creation time
//
// The Gateway API gives the oldest object precedence where objects
// compete: conflicting HTTPRoute and GRPCRoute rules, BackendTLSPolicies
// on one target, ListenerSet listeners on one port and hostname. A folder
// has no creation history, and neither the time of a load (it moves on
// every restart and differs between replicas) nor a file's mtime (a
// mounted ConfigMap's files are written when each replica mounts them,
// and every edit moves it) would give every replica the same answer. So
// an object's creationTimestamp is the one its manifest states
// (metadata.creationTimestamp, RFC 3339, as kubectl get -o yaml exports
// it), and for a manifest that states none (or null),
// 9999-12-31T23:59:59Z, the latest time a manifest can state. Objects
// without one tie, and the Gateway API's next rule decides: namespace, then
// name, alphabetically. An object with one is older than all objects
// without. Unlike an API server, which ignores a creationTimestamp in what
// it is sent, file mode honours it: state it to keep an established
// object's precedence over newcomers whose names sort first.
//
// # Rejections and reloads
//
// A rejected object is a Problem naming file, line (the document's first
// line with content, or a YAML error's own line), document (counted from
// 1), object and field, in the API server's words, one problem per error:
// its field-less "some validation rules were not checked" is said on the
// error that caused it, and a YAML parser's list of errors is one line. The
// object is left out; if an earlier read accepted an object of that kind,
// namespace and name, that version stays, as a rejected apply leaves the
// stored object. A file that cannot be read, or has a document that is not
// YAML (half-written, truncated), keeps every object it last contributed
// besides whatever its readable documents now say. A deleted file removes its
// objects. When two documents declare the same object (kind, namespace and
// name), one is served and each other is a Problem in its own file naming the
// file that holds the served one (kubectl would apply both, the last one
// winning; a duplicate is far more often a mistake than an intent, so it is
// reported rather than resolved silently). The established object stays: a
// file added later never takes it over, and while the holding file still
// declares the object (even half-written, or with an invalid edit) every
// newcomer is refused. When nothing is established (a cold start, or the
// holder stopped declaring it, e.g. was deleted) the first declaration by
// file path and document is served, so the outcome does not depend on the
// order files were written in (duplicates.go). An empty file declares nothing:
// truncating a file to zero bytes removes its objects, as applying it would
// not, so write manifests atomically (write beside, then rename, as a
// mounted ConfigMap's symlink swap does).
//
// When the folder itself disappears (deleted, or renamed away), the last
// configuration stays and Run looks for it every second until it is back.
//
// New reads the folder synchronously and returns synced collections. Run
// watches the folder (fsnotify on the folder and every subfolder, never on
// files, so renames and symlink swaps are seen), debounces events, and then
// reloads incrementally (reload.go, state.go):
//
//   - it lists the folder and reads only the files whose stat (device,
//     inode, size, modification and change times, files.go) differs from
//     the last read's, or that were written within a few seconds of it
//     (file system clocks tick in milliseconds, so an equal stat proves
//     nothing then); a file whose bytes are the same is left alone;
//   - each changed file is decoded on goroutines of its own (all cores but
//     one, so the rest of the control plane keeps a core while a large
//     file is validated), and within a file only the documents whose bytes
//     changed are decoded and
//     validated (a document's result depends on nothing else; it is moved
//     to its new place, its problems' lines with it; decodefiles.go);
//   - a decoded file is committed as soon as no file still being decoded
//     declares an object it declares (those identities are read before any
//     validation, from each document's lines where its shape allows,
//     quickIdentity, else by parsing it); files that share an object are
//     committed together,
//     so an object moved between files is never absent, and a small
//     change is never held behind a large file's validation;
//   - a commit decides again only the objects the committed files
//     declared, declare or held, and the refused duplicates (whose message
//     says whether the served one was loaded first): the outcome of each
//     commit is that of deciding the whole folder as above, with the files
//     not committed yet at their last committed state
//     (TestCommitsDecideAsTheWholeFolder checks it against the former
//     whole-folder decision);
//   - each collection gets only the differences, as one batch per commit
//     (krt.StaticCollection.ConditionalApply): an unchanged object emits no
//     event, and a commit of ten thousand objects is one round for each
//     derived collection. A file that changes again while it is decoded is
//     read again after its commit.
//
// Revision counts commits that changed an object or the problems. New
// decodes the documents of every file together on every core, custom
// resources first (their validation makes most of the garbage, the Pods
// most of what stays live), each result kept at its document's place, so
// the outcome is the one of a single goroutine.
//
// # Files
//
//   - source.go: Options, Source and New: the collections and their accessors,
//     the first read of the folder, and a commit's differences handed to each
//     collection as one batch.
//   - watch.go: Run: fsnotify on every folder of the tree, debounced
//     reloads, and the wait for a folder that disappeared.
//   - reload.go: the reloader: which files a reload reads (their stat), the
//     decoding of each changed file on goroutines of its own, and when a
//     decoded file is committed (no file still decoding declares one of its
//     objects).
//   - state.go: folder, the committed state of every file, and commit, which
//     decides again only the objects the committed files touch.
//   - files.go: the walk of the folder for manifest files (extensions, dot
//     names, symlinks) and each file's stat.
//   - stat_linux.go: the stat a reload compares on Linux (device, inode,
//     size, modification and change times).
//   - stat_other.go: elsewhere, size and modification time only, so every
//     reload reads every file again and compares its bytes.
//   - decodefiles.go: decoding of files, only the documents whose bytes
//     changed (the others' results moved to their new place), documents
//     decoded in parallel with custom resources first; the identities a
//     file declares, read before validation (declaredIDs).
//   - document.go: a file cut into YAML documents at "---", and a document to
//     JSON the way kubectl does.
//   - yamlblock.go: blockDocument, a hand reader of the block-style subset most
//     manifests are written in.
//   - yamlnodes.go: nodeDocument, a document read from yaml v3's node tree with
//     YAML 1.1's scalar rules, and shortWay, which picks between the two short
//     ways.
//   - genericjson.go: genericJSON, encoding/json's output for a decoded
//     document's generic value, written without reflection.
//   - decode.go: decoder, one document to accepted objects and problems by
//     kind, the object identity (idOf) and digest, and quickIdentity, a
//     document's identity read from its lines.
//   - builtin.go: built-in kinds: strict decoding, and the API server's
//     defaults and checks reproduced for Namespaces, Pods, Services, Secrets
//     and EndpointSlices.
//   - crds.go: the embedded CRDs (crds/, and the chart's own in owncrds/)
//     parsed into each served version's structural
//     schema, OpenAPI validator and CEL validator.
//   - custom.go: custom resources as the API server creates them: pruning,
//     defaulting, ObjectMeta, schema and CEL validation.
//   - destinationrule.go: Istio DestinationRules, checked for what
//     kube.DestinationRuleFromUnstructured reads of them.
//   - duplicates.go: pickDeclarations: which of several declarations of one
//     object is served.
//   - servermeta.go: the metadata an API server would set (uid, generation,
//     creationTimestamp), and the digests that decide a generation bump.
//   - problem.go: Problem, its one-line text, and its stable order.
//   - validator.go: Validator, one manifest checked as a Source checks each
//     document, for tests that generate objects (the route fuzz test).
package file
