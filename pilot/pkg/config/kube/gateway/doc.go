// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package gateway is the Gateway API and Gateway API Inference Extension
// controller: from GatewayClasses, Gateways, routes, ReferenceGrants and
// InferencePools it derives route attachment, each pool's gatewayParents, the
// pool's shadow Service and status, and what the xDS translator needs per
// Gateway.
//
// The rules are pure functions over the API types, one concept per file:
//   - gatewayclass.go: which classes are ours (spec.controllerName) and their
//     Accepted condition;
//   - classparams.go: a class's parameters (spec.parametersRef to a
//     ConfigMap; the key eppRequestBodyMode), and what an invalid
//     reference means for the class and its Gateways;
//   - listeners.go, gatewaystatus.go: a Gateway's listeners (protocols,
//     allowedRoutes, conflicts) and its status with attachedRoutes counts;
//   - certificates.go: an HTTPS listener's certificateRef (a kubernetes.io/tls
//     Secret, cross-namespace only with a ReferenceGrant) and why it does
//     not resolve (InvalidCertificateRef, RefNotPermitted);
//   - hostnames.go, attachment.go: a route's parentRefs against our Gateways
//     (sectionName, port, hostname intersection, allowedRoutes), giving
//     Accepted per parent with the standard reasons;
//   - referencegrant.go, backends.go: backendRefs to Services and
//     InferencePools, ReferenceGrants for cross-namespace references, and
//     Istio's exact messages for pool references;
//   - eppref.go: whether a pool's endpointPickerRef resolves, said the same
//     way in the pool's ResolvedRefs and in the ResolvedRefs of routes to it;
//   - shadowservice.go: a pool's shadow Service (name, labels, ports);
//   - inferencepool_status.go: a pool's status.parents entries, and whether
//     the pool is accepted (only then does it get a shadow Service).
//   - serving_status.go: a Gateway's Programmed=False/Invalid while the ADS
//     server serves it in part (model.GatewayServing, fed back from the
//     push path through ControllerConfig.Serving);
//   - tenantlimits.go: the routes of one namespace past its limits on one
//     Gateway (route matches, regular expressions), newest first,
//     Accepted=False/TooManyMatches on that Gateway.
//
// collections.go wires them into krt collections (Build): the same pipeline
// runs over informers in a cluster and over static collections in file mode,
// since every function takes its lookups as parameters. controller.go
// (Controller) connects Build's outputs to the leader-gated writers of
// pkg/kube/writer. architecture/controller.md draws the pipeline.
package gateway
