// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package kubeenv runs a real, throwaway Kubernetes control plane for one test:
// etcd, kube-apiserver and kube-controller-manager (and kube-scheduler when a
// test asks with [WithScheduler]), built from the Kubernetes release's own
// modules and started as child processes on free 127.0.0.1 ports.
// No kubelet, no pod network (but see [NewNetNS]): what shows only
// against a real API server (validation, defaulting, server-side apply field
// ownership, status subresources, owner-reference garbage collection,
// EndpointSlices, watch restarts) is real.
//
// Its one job: give a test a cluster, and take it away afterwards.
//
// Inputs: the binaries, found in $KUBE_TEST_BINARIES, or else in the versioned
// cache folder that hack/k8s-test-binaries.sh fills
// (${INFERMESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infermesh}/k8s/v1.37.2/bin).
// Missing binaries fail the test with a message naming the script; they never
// skip it.
//
// Outputs: an [Env] with a kubeconfig file ([Env.Kubeconfig]), a REST config with
// raised client rate limits ([Env.RESTConfig]) for an identity in system:masters,
// a Node named [NodeName], and the apiserver's audit log, one event per request
// at Metadata level, parsed by [Env.AuditEvents] so a test can check who wrote
// what, with which verb and field manager.
//
// CRDs: [WithStandardCRDs] (or [Env.ApplyStandardCRDs] on a running Env)
// installs the Gateway API standard channel and the InferencePool CRD from the
// modules' own manifests, at the versions in go.mod, found in the module cache
// with `go list -m` (and `go mod download` if missing); [GatewayAPICRDs] and
// [InferencePoolCRD] return their paths, for [WithCRDs] / [Env.ApplyCRDs] on
// their own. [InferenceObjectiveCRD] (GIE [InferenceObjectiveVersion], that one
// CRD only, for the full endpoint picker) and [DestinationRuleCRD] (istio.io/api
// [IstioAPIVersion], only destinationrules.networking.istio.io, extracted from the
// module's customresourcedefinitions.gen.yaml) come from modules outside go.mod,
// fetched with `go mod download` at those pinned versions; pass them to
// [WithCRDs].
// A CRD just Established answers its first List in about 1 s and its first
// Create in about 2 s here; later requests take milliseconds.
//
// The controller-manager runs the EndpointSlice, EndpointSlice-mirroring,
// garbage-collector and service-account controllers (add more with
// [WithControllers]; flags such as a higher client rate limit with
// [WithControllerManagerArgs]). [WithScheduler] adds kube-scheduler, acting as
// [SchedulerUser] through the apiserver's bootstrap RBAC (not system:masters),
// without leader election, its HTTPS port on a free loopback port; Start waits
// for its /readyz, and it stops first. It binds pods only to Nodes that report
// Ready and have room, after node-lifecycle-controller has lifted admission's
// not-ready taint (see [WithScheduler]). Since there is no kubelet, pods stay Pending until a test
// plays the kubelet's part with [MarkPodReady] / [SetPodReady]: bind the pod to
// the Node and write its IP, phase and Ready condition through the status
// subresource. Then the EndpointSlice controller publishes it (measured here:
// within 0.1 s on an idle machine; allow seconds). To load thousands of
// ready pods, [CreateBoundReadyPod] creates one already bound to the Node
// and writes its status in two requests (CreateReadyPods makes five).
// Pod addresses must not be loopback (the apiserver rejects 127.0.0.0/8 endpoint
// addresses); use data such as 10.244.0.x. No test may send traffic to such an
// address unless it lives in the test's own network namespace:
// [NewNetNS](t, name, "10.244.0.13", ...) creates one with a veth pair, the
// given addresses inside, and host routes to them, and [NetNS.Listen] /
// [NetNS.Run] start servers there; its t.Cleanup deletes it all. It needs root
// and iproute2's ip command, and fails the test (never skips) without them.
//
// Fault injection: [Env.StopAPIServer] kills kube-apiserver (SIGKILL) and
// [Env.StartAPIServer] starts it again on the same port with the same
// certificates and etcd data, so clients and informers can reconnect.
//
// Rules for callers:
//   - [Start], [Env.StopAPIServer], [Env.StartAPIServer] and [Env.ApplyCRDs] stop
//     the test with t.Fatal when the harness fails: call them from the test's
//     own goroutine. [Env.AuditEvents] and the kubelet stand-in return errors.
//   - Start registers a t.Cleanup that stops kube-scheduler (if running), then
//     kube-controller-manager, then kube-apiserver, then etcd, whether the test passed or not, and attaches each
//     process's log to the test output only when the test failed. [Env.Stop]
//     does the stopping earlier (for good; idempotent); the cleanup then only
//     attaches the logs.
//   - Each Start is a whole new cluster: about 3 s of start-up on 2 cores, of
//     which the harness adds about 0.2 s to kube-apiserver's own readiness
//     ([Env.APIServerReadyAfter]); BenchmarkClusterStart in
//     tests/integration/kubebench measured medians (of 5) of 2.8 to 3.0 s and
//     0.16 s.
//   - After a restart of the apiserver, kube-controller-manager's informers
//     reconnect with client-go's backoff (up to 30 s): bound waits accordingly.
//   - The audit log is written after a response completes: poll it with a bound
//     rather than reading it once right after a request.
//
// # Files
//
// The cluster:
//
//   - env.go: Env and Start: the boot in order, the Node, RESTConfig, Stop and
//     the cleanup that attaches logs.
//   - options.go: Option: binaries, controllers, extra flags, CRDs, start-up
//     timeout, scheduler, ServiceAccount admission.
//   - binaries.go: where the Kubernetes binaries are found
//     ($KUBE_TEST_BINARIES, else the script's cache folder).
//   - process.go: process, one control-plane binary run as a child with a log
//     that outlives restarts.
//   - etcd.go: the single-member etcd on loopback, and its health check.
//   - apiserver.go: kube-apiserver with RBAC, static tokens and an audit log,
//     /readyz, and StopAPIServer and StartAPIServer for fault injection.
//   - controllermanager.go: kube-controller-manager with only the given
//     controllers.
//   - scheduler.go: kube-scheduler as SchedulerUser, and its /readyz.
//   - files.go: the certificates, tokens and kubeconfig the control plane and
//     clients use.
//   - ports.go: free loopback ports.
//   - wait.go: waitFor, a bounded poll that also stops when the process exits.
//   - audit.go: AuditEvent, AuditEvents and ParseAuditLog: who wrote what, read
//     from the audit log.
//
// CRDs:
//
//   - crds.go: ApplyCRDs: CRD files server-side applied and waited for until
//     Established.
//   - standardcrds.go: the Gateway API and InferencePool CRDs from the modules
//     in go.mod, and WithStandardCRDs.
//   - extracrds.go: the InferenceObjective and DestinationRule CRDs from
//     modules outside go.mod, at pinned versions.
//
// Playing the kubelet, and pod networks:
//
//   - kubelet.go: MarkPodReady, SetPodReady, CreateReadyPods and
//     CreateBoundReadyPod: pods bound, addressed and made Ready as a kubelet
//     would.
//   - netns.go: NetNS and NewNetNS: a network namespace holding pod addresses
//     the host can reach, with Run and Listen inside it.
//   - relay.go: NetNS.Relay, connections to a pod address inside the namespace
//     copied to a server on the host's loopback.
//   - addrlock.go: LockAddresses, machine-wide locks on pod addresses, so that
//     test processes routing the same addresses take turns.
package kubeenv
