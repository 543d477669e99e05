// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package gateway is the Gateway API and Gateway API Inference Extension
// controller: from GatewayClasses, Gateways, routes, ReferenceGrants and
// InferencePools it derives route attachment, each pool's gatewayParents, the
// pool's shadow Service, the status of every object it handles, each
// Gateway's deployment, and what the xDS translator needs per Gateway.
//
// The rules are pure functions over the API types, one concept per file, each
// taking its lookups as parameters. Build (collections.go) wires them into
// krt collections, one builder per output (the *_collections.go files): the
// same pipeline runs over informers in a cluster and over static collections
// in file mode (offline.go). Controller
// (controller.go) connects Build's outputs to the leader-gated writers of
// pkg/kube/writer: the writes (controller.go, deployment_writer.go) and the
// Warning Events on routes with rules that cannot be served (ruleproblems.go)
// run only from there, while this replica leads. architecture/controller.md
// draws the pipeline.
//
// # Files
//
// Classes and Gateways:
//
//   - gatewayclass.go: which classes are ours (spec.controllerName), and the
//     Accepted condition we write on them.
//   - classparams.go: a class's parameters (spec.parametersRef to a ConfigMap;
//     the key eppRequestBodyMode), and what an invalid reference means for the
//     class and its Gateways.
//   - features.go: SupportedFeatures, the Gateway API features our classes
//     publish in status.
//   - listeners.go: GatewayView and ListenerView: a Gateway's listeners
//     validated (protocols, allowedRoutes, port and hostname conflicts).
//   - listenerfilters.go: a listener's filters.requests (GEP-5224) resolved to
//     infermesh.io ExternalProcessors (ResolveExternalProcessor,
//     ProcessorConditions), with the spec's listener reasons
//     (InvalidListenerFilterRef, InvalidListenerFilter, UnsupportedValue).
//   - processorstatus.go: each ExternalProcessor's own status
//     (ExternalProcessorStatuses) and its writer, server-side apply of the
//     status subresource through the dynamic client.
//   - listenerset.go: ListenerSets attached to our Gateways: which are allowed,
//     their listeners in precedence order, and their status.
//   - certificates.go: an HTTPS listener's certificateRef (a kubernetes.io/tls
//     Secret, cross-namespace only with a ReferenceGrant) and why it does not
//     resolve.
//   - frontendtls.go: the client-certificate validation spec.tls.frontend asks
//     of an HTTPS listener, and its caCertificateRefs resolved.
//   - addresses.go: a Gateway's spec.addresses, and why they cannot be used.
//   - gatewaystatus.go: GatewayStatus and WithProgrammed: a Gateway's
//     conditions and its listeners' entries with attachedRoutes counts.
//   - serving_status.go: a Gateway's Programmed=False/Invalid while the ADS
//     server serves it in part (model.GatewayServing, fed back from the push
//     path).
//
// Routes and backends:
//
//   - hostnames.go: hostname intersection between listeners and routes,
//     wildcards included; which listener owns a hostname on a port (listener
//     isolation, the translator's own rule core.OwnerHostname, over the
//     Gateway's and its ListenerSets' listeners alike).
//   - attachment.go: AttachRoute: a route's parentRefs against our Gateways and
//     ListenerSets (sectionName, port, hostnames, allowedRoutes), giving
//     Accepted per parent with the standard reasons; AttachedRoutes counts;
//     the hostnames a more specific listener of another namespace takes from
//     a route (TakenHostname: the route's Conflicted=True, the listener's
//     TakesHostnames=True).
//   - referencegrant.go: ReferenceGrantAllows, whether a cross-namespace
//     reference is granted.
//   - backends.go: ResolveBackendRef: backendRefs to Services and
//     InferencePools resolved, with Istio's exact messages for pool references;
//     RouteResolvedRefs folds them per route.
//   - externalauth.go: a rule's ExternalAuth filters resolved (a Service
//     port, ReferenceGrant, HTTP/2 for GRPC, upstream TLS), the failures
//     counted in ResolvedRefs; one in a backendRef's filters refused.
//   - mirrors.go: RequestMirror backendRefs resolved, and the mirrors that do
//     not resolve left out.
//   - backendtls.go: the client TLS of every upstream (Service backends,
//     mirrors, EPPs) from pilot/pkg/config/kube/upstreamtls, an upstream whose
//     TLS cannot be honoured made an invalid backend (InvalidBackendTLS), and
//     the BackendTLSPolicy's own status.
//   - ruleproblems.go: the rules the translator cannot serve (core.CheckRoute),
//     as the PartiallyInvalid message and as Warning Events on the route.
//
// InferencePools:
//
//   - eppref.go: whether a pool's endpointPickerRef resolves, said the same way
//     in the pool's ResolvedRefs and in those of routes to it.
//   - inferencepool_status.go: PoolGatewayParents, a pool's gatewayParents
//     folded from the routes that reference it; PoolParentStatuses, its
//     status.parents entries, and whether the pool is accepted (only then does
//     it get a shadow Service).
//   - routestatus.go: RouteParentStatuses: a route's status.parents entries
//     (Accepted, ResolvedRefs per parent, PartiallyInvalid, Conflicted).
//   - tenantlimits.go: the routes of one namespace past its limits on one
//     Gateway (route matches, regular expressions), newest first, refused
//     with Accepted=False/TooManyMatches on that Gateway; limitRoutes, the
//     step between the resolved routes and everything that reads them.
//   - shadowservice.go: a pool's shadow Service (name, labels, ports) and its
//     EPP failure mode.
//
// Gateway deployments:
//
//   - deployment.go: BuildDeployments and DesiredDeployment: the Deployment,
//     Service, ServiceAccount and bootstrap ConfigMap of each Gateway in scope.
//   - deployment_status.go: a deployed Gateway's Programmed condition and
//     status.addresses, read from its Service.
//   - deployment_writer.go: the proxy settings from the feature flags, and the
//     four writers of deployment objects.
//
// Wiring:
//
//   - collections.go: Inputs, Options, Outputs, and Build, which wires every
//     rule above into krt collections, one builder per output.
//   - gateway_collections.go: the builders of class parameters, ClassStatuses,
//     Gateways, GatewayStatuses, ListenerSetStatuses and Models.
//   - route_collections.go: the builders of the HTTPRoute, GRPCRoute,
//     TLSRoute and TCPRoute results (attachment and backends resolved) and
//     the routes' attachments.
//   - pool_collections.go: the builders of GatewayParents, InferencePools,
//     PoolStatuses and ShadowServices.
//   - results.go: the result types of those collections (RouteResult,
//     GatewayStatusResult, InferencePoolObject, ...), each with its krt key.
//   - translator_gateway.go: TranslatorGateway, the translator's view of one
//     Gateway (model.Gateway), and a route's model (modelRoute).
//   - controller.go: Controller over a cluster: Build over informers, and the
//     leader-gated writers of shadow Services, statuses and the default
//     GatewayClass.
//   - offline.go: NewOffline for file mode (computed, never written), the
//     default GatewayClass, and shadow Services as the objects the API server
//     would store.
//   - statusdocs.go: StatusDocuments and WriteStatusDocuments: every status
//     the writers would write, as the YAML documents status -f prints and the
//     golden cases of testdata/ compare (TestGolden, testdata/README.md).
package gateway
