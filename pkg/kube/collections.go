// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	inferencev1informers "sigs.k8s.io/gateway-api-inference-extension/client-go/informers/externalversions/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1informers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// The krt collections over the Client's informers. Each is created on first
// use and returned again on every later call (one informer and one collection
// per type and Client), named after the method, released when the Client ends,
// and registered with the Options' debug handler.
//
// Required types (core, Gateway, GatewayClass, HTTPRoute, ReferenceGrant) are
// krt.NewInformer over the shared factories: their CRDs are a precondition,
// and without them the collection never syncs. Optional types (InferencePool,
// GRPCRoute, BackendTLSPolicy, DestinationRule, ListenerSet, TLSRoute,
// TCPRoute) wait for their CRD
// (optional.go): synced and empty while it is absent.

// Pods returns all Pods.
func (c *Client) Pods() krt.Collection[*corev1.Pod] {
	return informerCollection[*corev1.Pod](c, "Pods", func() cache.SharedIndexInformer {
		return c.kubeInformers.Core().V1().Pods().Informer()
	})
}

// Services returns all Services.
func (c *Client) Services() krt.Collection[*corev1.Service] {
	return informerCollection[*corev1.Service](c, "Services", func() cache.SharedIndexInformer {
		return c.kubeInformers.Core().V1().Services().Informer()
	})
}

// EndpointSlices returns all EndpointSlices.
func (c *Client) EndpointSlices() krt.Collection[*discoveryv1.EndpointSlice] {
	return informerCollection[*discoveryv1.EndpointSlice](c, "EndpointSlices", func() cache.SharedIndexInformer {
		return c.kubeInformers.Discovery().V1().EndpointSlices().Informer()
	})
}

// Namespaces returns all Namespaces.
func (c *Client) Namespaces() krt.Collection[*corev1.Namespace] {
	return informerCollection[*corev1.Namespace](c, "Namespaces", func() cache.SharedIndexInformer {
		return c.kubeInformers.Core().V1().Namespaces().Informer()
	})
}

// Secrets returns all Secrets, each cut down to its type, for
// kubernetes.io/tls Secrets tls.crt and tls.key, and for any Secret its CA
// bundle keys cacert and ca.crt (TLSSecretTransform): the certificates
// HTTPS listeners name, and the CA bundles DestinationRules name in
// credentialName.
func (c *Client) Secrets() krt.Collection[*corev1.Secret] {
	return informerCollection[*corev1.Secret](c, "Secrets", func() cache.SharedIndexInformer {
		return c.kubeInformers.Core().V1().Secrets().Informer()
	})
}

// ConfigMaps returns all ConfigMaps (for the CA bundles that
// BackendTLSPolicy spec.validation.caCertificateRefs names, key ca.crt).
func (c *Client) ConfigMaps() krt.Collection[*corev1.ConfigMap] {
	return informerCollection[*corev1.ConfigMap](c, "ConfigMaps", func() cache.SharedIndexInformer {
		return c.kubeInformers.Core().V1().ConfigMaps().Informer()
	})
}

// Nodes returns all Nodes.
func (c *Client) Nodes() krt.Collection[*corev1.Node] {
	return informerCollection[*corev1.Node](c, "Nodes", func() cache.SharedIndexInformer {
		return c.kubeInformers.Core().V1().Nodes().Informer()
	})
}

// Gateways returns all Gateways (gateway.networking.k8s.io/v1).
func (c *Client) Gateways() krt.Collection[*gatewayv1.Gateway] {
	return informerCollection[*gatewayv1.Gateway](c, "Gateways", func() cache.SharedIndexInformer {
		return c.gatewayInformers.Gateway().V1().Gateways().Informer()
	})
}

// GatewayClasses returns all GatewayClasses (gateway.networking.k8s.io/v1).
func (c *Client) GatewayClasses() krt.Collection[*gatewayv1.GatewayClass] {
	return informerCollection[*gatewayv1.GatewayClass](c, "GatewayClasses", func() cache.SharedIndexInformer {
		return c.gatewayInformers.Gateway().V1().GatewayClasses().Informer()
	})
}

// HTTPRoutes returns all HTTPRoutes (gateway.networking.k8s.io/v1).
func (c *Client) HTTPRoutes() krt.Collection[*gatewayv1.HTTPRoute] {
	return informerCollection[*gatewayv1.HTTPRoute](c, "HTTPRoutes", func() cache.SharedIndexInformer {
		return c.gatewayInformers.Gateway().V1().HTTPRoutes().Informer()
	})
}

// ReferenceGrants returns all ReferenceGrants (gateway.networking.k8s.io/v1).
func (c *Client) ReferenceGrants() krt.Collection[*gatewayv1.ReferenceGrant] {
	return informerCollection[*gatewayv1.ReferenceGrant](c, "ReferenceGrants", func() cache.SharedIndexInformer {
		return c.gatewayInformers.Gateway().V1().ReferenceGrants().Informer()
	})
}

// GRPCRoutes returns all GRPCRoutes (gateway.networking.k8s.io/v1); optional.
func (c *Client) GRPCRoutes() krt.Collection[*gatewayv1.GRPCRoute] {
	return optionalCollectionFor(c, "GRPCRoutes", grpcRouteCRD, func() cache.SharedIndexInformer {
		return c.typedInformer(gatewayv1informers.NewGRPCRouteInformer(c.gateway, "", c.opts.resync, cache.Indexers{}))
	}, typedConvert[*gatewayv1.GRPCRoute]("GRPCRoutes"))
}

// BackendTLSPolicies returns all BackendTLSPolicies
// (gateway.networking.k8s.io/v1); optional.
func (c *Client) BackendTLSPolicies() krt.Collection[*gatewayv1.BackendTLSPolicy] {
	return optionalCollectionFor(c, "BackendTLSPolicies", backendTLSPolicyCRD, func() cache.SharedIndexInformer {
		return c.typedInformer(gatewayv1informers.NewBackendTLSPolicyInformer(c.gateway, "", c.opts.resync, cache.Indexers{}))
	}, typedConvert[*gatewayv1.BackendTLSPolicy]("BackendTLSPolicies"))
}

// ListenerSets returns all ListenerSets (gateway.networking.k8s.io/v1);
// optional.
func (c *Client) ListenerSets() krt.Collection[*gatewayv1.ListenerSet] {
	return optionalCollectionFor(c, "ListenerSets", listenerSetCRD, func() cache.SharedIndexInformer {
		return c.typedInformer(gatewayv1informers.NewListenerSetInformer(c.gateway, "", c.opts.resync, cache.Indexers{}))
	}, typedConvert[*gatewayv1.ListenerSet]("ListenerSets"))
}

// TLSRoutes returns all TLSRoutes (gateway.networking.k8s.io/v1); optional.
func (c *Client) TLSRoutes() krt.Collection[*gatewayv1.TLSRoute] {
	return optionalCollectionFor(c, "TLSRoutes", tlsRouteCRD, func() cache.SharedIndexInformer {
		return c.typedInformer(gatewayv1informers.NewTLSRouteInformer(c.gateway, "", c.opts.resync, cache.Indexers{}))
	}, typedConvert[*gatewayv1.TLSRoute]("TLSRoutes"))
}

// TCPRoutes returns all TCPRoutes (gateway.networking.k8s.io/v1); optional.
func (c *Client) TCPRoutes() krt.Collection[*gatewayv1.TCPRoute] {
	return optionalCollectionFor(c, "TCPRoutes", tcpRouteCRD, func() cache.SharedIndexInformer {
		return c.typedInformer(gatewayv1informers.NewTCPRouteInformer(c.gateway, "", c.opts.resync, cache.Indexers{}))
	}, typedConvert[*gatewayv1.TCPRoute]("TCPRoutes"))
}

// InferencePools returns all InferencePools (inference.networking.k8s.io/v1);
// optional.
func (c *Client) InferencePools() krt.Collection[*inferencev1.InferencePool] {
	return optionalCollectionFor(c, "InferencePools", inferencePoolCRD, func() cache.SharedIndexInformer {
		return c.typedInformer(inferencev1informers.NewInferencePoolInformer(c.inference, "", c.opts.resync, cache.Indexers{}))
	}, typedConvert[*inferencev1.InferencePool]("InferencePools"))
}

// DestinationRules returns the fields we use of all Istio DestinationRules
// (networking.istio.io/v1), read through the dynamic client; optional. A
// DestinationRule that cannot be read is logged and left out.
func (c *Client) DestinationRules() krt.Collection[DestinationRule] {
	return optionalCollectionFor(c, "DestinationRules", destinationRuleCRD, func() cache.SharedIndexInformer {
		return newDestinationRuleInformer(c.dynamic, c.opts.resync)
	}, destinationRuleConvert)
}

func (c *Client) typedInformer(inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	_ = inf.SetTransform(c.strip) // cannot fail: the informer is not running
	return inf
}

func (c *Client) collectionOptions(name string) []krt.CollectionOption {
	return []krt.CollectionOption{krt.WithName(name), krt.WithStop(c.stop), krt.WithDebugging(c.opts.debug)}
}

func informerCollection[T any](c *Client, name string, informer func() cache.SharedIndexInformer) krt.Collection[T] {
	return memo(c, name, func() krt.Collection[T] {
		return krt.NewInformer[T](informer(), c.collectionOptions(name)...)
	})
}

func optionalCollectionFor[T any](c *Client, name string, kind crdKind, newInformer func() cache.SharedIndexInformer,
	convert func(obj any) (T, bool)) krt.Collection[T] {
	return memo(c, name, func() krt.Collection[T] {
		return newOptional(c, name, kind, newInformer, convert).col
	})
}

// memo returns the collection called name, building it on first use; a
// Client already started starts the new informers at once.
func memo[T any](c *Client, name string, build func() krt.Collection[T]) krt.Collection[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if col, ok := c.collections[name]; ok {
		return col.(krt.Collection[T])
	}
	col := build()
	c.collections[name] = col
	if c.started {
		c.startLocked()
	}
	return col
}
