// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package node is a node agent for one-machine clusters: a Kubernetes Node
// whose pods run as local processes. Its one job: run the pods bound to its
// Node as a kubelet and a container runtime would, closely enough that a
// conformance suite cannot tell (architecture/node.md lists every
// difference and why none changes a conformance result).
//
// The Kubernetes side is virtual-kubelet's (github.com/virtual-kubelet/
// virtual-kubelet/node): its NodeController registers the Node and keeps its
// status and its Lease in kube-node-lease; its PodController watches the
// pods bound to the Node (spec.nodeName), calls the provider, writes the
// statuses the provider reports, records events and deletes a pod from the
// API once it has terminated. There is no pod-sync loop here. The process
// side is this package's provider (provider.go: virtual-kubelet's
// PodLifecycleHandler and PodNotifier):
//
//   - Network (bridge.go, sandbox.go, ipam.go): a host bridge holds the pod
//     CIDR's first address, which is also the Node's InternalIP and every
//     pod's hostIP. Each pod gets a network namespace with eth0 (a veth pair
//     whose host end is on the bridge), one IPv4 address from the CIDR and a
//     default route through the bridge, as on a node with a bridge CNI.
//     The host reaches every pod address; pods reach each other and the
//     host. This is kubeenv.NewNetNS's approach (ip netns, veth) with a
//     bridge, so pods get a gateway; it needs root and iproute2.
//
//   - Containers (container.go, process.go, image.go): each container is a
//     process started in its pod's namespace (setns on a locked OS thread,
//     then fork and exec), so the containers of a pod share its address
//     and loopback. Config.Images maps an image reference to a host binary
//     (the image's ENTRYPOINT), with the image's CMD and ENV; a container
//     command replaces the entrypoint, as a runtime does. An image not in the
//     map leaves its container waiting with ErrImagePull and a Warning event
//     naming the image; nothing else is ever run in its place.
//
//   - Environment (env.go, expansion.go, fieldref.go, serviceenv.go): built as
//     the kubelet's makeEnvironmentVariables does: envFrom, env with $(VAR)
//     expansion, downward API fieldRefs (metadata.*, spec.nodeName,
//     spec.serviceAccountName, status.podIP, status.hostIP), ConfigMap and
//     Secret keys, resourceFieldRef (resourcefieldref.go), and the Service variables (FOO_SERVICE_HOST, ...; the
//     default namespace's kubernetes Service always, the pod namespace's
//     Services unless enableServiceLinks is false). Command and args are
//     expanded against the result.
//
//   - API access (credentials.go, apiforward.go): each pod gets KUBECONFIG,
//     a file in its folder naming the API server at the bridge address
//     (a forwarder there copies connections to the API server, which
//     listens on 127.0.0.1, unreachable from a pod's namespace), its CA,
//     the server name its certificate carries, and a token of the pod's
//     ServiceAccount bound to the pod (TokenRequest), so the pod acts with
//     its own RBAC as in a cluster. Why a kubeconfig rather than in-cluster
//     config: in-cluster config needs KUBERNETES_SERVICE_HOST, which the
//     kubelet sets to the kubernetes Service's ClusterIP, and nothing routes
//     ClusterIPs here (no kube-proxy); the files would also have to appear at
//     /var/run/secrets/kubernetes.io/serviceaccount, which processes sharing
//     the host's filesystem cannot each have. client-go's and
//     controller-runtime's loaders read KUBECONFIG before in-cluster config.
//     When the cluster adds the kube-api-access volume (the ServiceAccount
//     admission plugin on), it is mounted like any other (volumes.go), so a
//     program that prefers in-cluster config works where the cluster routes
//     the kubernetes Service's ClusterIP.
//
//   - Probes (prober.go, probehandlers.go, containerprobes.go): httpGet,
//     tcpSocket and gRPC (grpc.health.v1 with the probe's service)
//     readiness, liveness and startup probes, from the host to the pod IP,
//     with initialDelaySeconds, periodSeconds, timeoutSeconds,
//     successThreshold and failureThreshold. Readiness sets the container's
//     ready flag; a failed liveness or startup probe kills the container
//     and it restarts.
//
//   - Status and lifecycle (status.go, pod.go): phase, podIP/podIPs, hostIP,
//     the kubelet's conditions (PodScheduled, PodReadyToStartContainers,
//     Initialized, ContainersReady, Ready), containerStatuses with state,
//     lastState, ready, started and restartCount. Restarts follow
//     restartPolicy with the kubelet's back-off (none before the first
//     restart, then Config.InitialBackOff doubling to Config.MaxBackOff).
//     Deletion sends SIGTERM to each container, then SIGKILL to its process
//     group when the deletion grace period ends; virtual-kubelet deletes the
//     pod object (see architecture/node.md for when).
//
//   - Volumes (volumes.go, mounts.go): configMap, secret, projected
//     (serviceAccountToken with its audience, configMap, secret,
//     downwardAPI) and emptyDir volumes are written once into the pod's
//     folder when the pod starts (retried with a back-off while a ConfigMap
//     or Secret they name is missing, as the kubelet retries a mount; the
//     containers wait meanwhile); each container with volumeMounts runs in
//     a mount namespace of its own where they are bind-mounted at their
//     mount paths (read-only when asked), as a runtime does.
//
//   - DNS (resolvconf.go): each pod's resolv.conf by its dnsPolicy, as the
//     kubelet's GetPodDNS writes it (ClusterFirst: Config.ClusterDNS, search
//     <ns>.svc.<domain> svc.<domain> <domain>, ndots:5), bound over
//     /etc/resolv.conf in each container's mount namespace (mounts.go).
//
// Unsupported pod features (init containers, other volume kinds, subPath,
// workingDir, lifecycle hooks, exec probes, readiness
// gates, hostNetwork) keep the pod's containers waiting with
// CreateContainerConfigError and a Warning event that names them.
//
// Outputs: each container run's stdout and stderr go, in the CRI log
// format, to StateDir/logs/<namespace>_<name>_<uid>/<container>/<restartCount>.log
// (the kubelet's /var/log/pods layout; Node.LogPath), served to the API
// server's pods/log by the kubelet API when Config.KubeletClientCA is set
// (logs.go, kubeletapi.go); virtual-kubelet's own log goes to
// StateDir/virtual-kubelet.log.
//
// Rules for callers: run as root; give each Node that runs at the same time
// its own PodCIDR and BridgeName; call Stop (it kills every process, deletes
// the namespaces and the bridge); the Node object stays in the API.
//
// # Files
//
// The agent and the Node:
//
//   - node.go: Node, Start and Stop: the pod network, virtual-kubelet's
//     controllers and informers, and the log paths.
//   - config.go: Config, its defaults and validation, and the restart back-off.
//   - nodeobject.go: the Node object the agent registers: addresses, capacity,
//     conditions, pod CIDR.
//   - provider.go: provider, virtual-kubelet's PodLifecycleHandler and
//     PodNotifier: pods created, updated and deleted as processes.
//   - kubeletapi.go: the kubelet HTTPS API the API server proxies pods/log to.
//   - logs.go: container output written in the CRI log format, and read back
//     for pods/log.
//
// Network:
//
//   - bridge.go: the host bridge holding the pod CIDR's gateway address.
//   - sandbox.go: a pod's network namespace with eth0 on the bridge.
//   - ipam.go: pod addresses handed out from the pod CIDR.
//   - iproute.go: ipTool, iproute2's ip command run step by step.
//   - apiforward.go: the forwarder on the bridge address that lets pods reach
//     the API server.
//   - resolvconf.go: each pod's resolv.conf by its dnsPolicy, as the kubelet
//     writes it.
//
// Pods and containers:
//
//   - pod.go: podRuntime, one pod's sandbox, volumes and containers, started
//     and killed.
//   - container.go: container, one container's runs, restarts with back-off,
//     and termination.
//   - process.go: process, one container run as a local process in the pod's
//     namespace.
//   - image.go: Image, an image reference mapped to a host binary, and the
//     command line built from it.
//   - validate.go: the pod features the agent does not support, named for the
//     pod's event.
//   - status.go: the pod's phase, conditions and container statuses as the
//     kubelet reports them.
//
// Environment and credentials:
//
//   - env.go: a container's environment: env, envFrom and valueFrom sources.
//   - expansion.go: $(VAR) expansion as the kubelet does it.
//   - fieldref.go: downward API fieldRef values.
//   - resourcefieldref.go: downward API resourceFieldRef values.
//   - serviceenv.go: the Service environment variables (FOO_SERVICE_HOST, ...).
//   - credentials.go: each pod's kubeconfig with a token of its ServiceAccount
//     bound to the pod.
//
// Volumes and probes:
//
//   - volumes.go: configMap, secret, projected and emptyDir volumes written
//     into the pod's folder.
//   - mounts.go: each container's mount namespace with its volumes and
//     resolv.conf bind-mounted.
//   - prober.go: probeWorker, one probe of one container run on the kubelet's
//     schedule.
//   - probehandlers.go: httpGet, tcpSocket and gRPC probe checks from the host
//     to the pod IP.
//   - containerprobes.go: a container's probes started, and their results:
//     ready flag set or the container killed.
package node
