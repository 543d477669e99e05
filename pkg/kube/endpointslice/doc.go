// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package endpointslice computes the EndpointSlices that kube-controller-manager's
// EndpointSlice controller (k8s.io/kubernetes/pkg/controller/endpointslice, with
// its reconciler in k8s.io/endpointslice) would maintain for a Service, from the
// Pods the Service selects. It exists for file mode (pilot-discovery -f DIR),
// where no controller manager runs: a Service read from manifests, or computed in
// process (an InferencePool's shadow Service), must still get endpoints.
//
// Inputs: a Service and Pods (with status). Outputs: EndpointSlices, as values
// that are never written to an API server.
//
//   - ForService is the pure function: one Service, its Pods, its slices.
//   - Collection is the krt pipeline: every Service with a selector and no
//     EndpointSlice of its own among the given slices gets ForService's result,
//     joined with the given slices. Only the Services a change can affect are
//     recomputed.
//
// # What matches the controller
//
// Pod selection, endpoint conditions (ready, serving, terminating), addresses,
// target references, node names, hostnames, target-port resolution, grouping by
// resolved port set, one slice family per address type, the placeholder slice
// for a Service without endpoints, labels and the owner reference follow the
// controller as of Kubernetes v1.37; each rule is cited where it is coded.
//
// # Where it differs, and why
//
//   - Names. The controller names slices with metadata.generateName
//     ("<service>-" plus random characters chosen by the API server), so names
//     in a cluster are random. Here a name is "<service>-" plus a hash of the
//     slice's address type, port set and position, so the same inputs always
//     give the same names, and a Pod change keeps names stable.
//   - Packing. The controller fills existing slices first and takes endpoints
//     from a set in random order; here endpoints are sorted by Pod name and cut
//     into slices of at most MaxEndpointsPerSlice in that order. The set of
//     endpoints per address type and port set is the same; their distribution
//     over slices can differ.
//   - Nodes. The controller reads the Pod's Node for the zone, and leaves out a
//     Pod whose Node does not exist (unless publishNotReadyAddresses). File mode
//     has no Nodes: ForService sets no zone and keeps such Pods;
//     ForServiceWithZones takes a zone lookup.
//   - Address families of a Service without spec.ipFamilies. The API server
//     defaults spec.ipFamilies, so the controller reads them; its fallback for
//     undefaulted objects (the ClusterIP's family, else both families) is kept
//     for a ClusterIP, but a Service with neither (headless or unallocated, as
//     manifests often are) gets the families of its Pods' IPs (IPv4 when no Pod
//     has an IP), standing in for the cluster's primary family that the API
//     server would have chosen. This avoids an empty IPv6 slice beside every
//     IPv4 one.
//   - Pod IPs. The controller reads status.podIPs; the API server keeps
//     status.podIP equal to podIPs[0]. Manifests may set only podIP, so it is
//     used when podIPs is empty.
//   - Not computed: the endpoints.kubernetes.io/last-change-trigger-time
//     annotation (a clock reading) and topology hints (trafficDistribution and
//     the topology-mode annotation).
//   - An empty, non-nil spec.selector is treated as no selector: the API server
//     drops empty maps, so a Service read back from a cluster never has one.
//
// # Files
//
//   - slices.go: ForService and ForServiceWithZones: a Service's slices by
//     address type and port set, with their names, labels and owner reference.
//   - endpoints.go: which Pods a Service selects and may have endpoints, and
//     one Pod's endpoint (addresses, conditions, target reference).
//   - ports.go: a Service port's targetPort resolved on a Pod, and the port
//     mapping key Pods are grouped by.
//   - podfields.go: PodFields and ReducePodFields, a Pod cut to the fields this
//     package reads.
//   - collection.go: Collection, the krt pipeline: computed slices for Services
//     without their own, joined with the given slices.
package endpointslice
