// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// gatewayParentsCollection is Outputs.GatewayParents: each pool's
// gatewayParents, folded from every route that references it
// (PoolGatewayParents); pools no route of ours references are absent.
func (b *builder) gatewayParentsCollection(routes krt.Collection[RouteResult]) krt.Collection[GatewayParents] {
	routesByPool := krt.NewIndex(routes, "routes-by-pool", func(r RouteResult) []types.NamespacedName { return r.Pools })
	return krt.NewCollection(b.pools, func(ctx krt.HandlerContext, pool *inferencev1.InferencePool) *GatewayParents {
		key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
		parents := PoolGatewayParents(key, routesByPool.Fetch(ctx, key))
		if len(parents) == 0 {
			return nil
		}
		return &GatewayParents{Pool: key, Parents: parents}
	}, b.with("GatewayParents")...)
}

// inferencePoolCollection is Outputs.InferencePools: each pool with a
// gatewayParent, its EPP Service and that Service port's client TLS as the
// parents' Gateways would use it.
func (b *builder) inferencePoolCollection(gatewayParents krt.Collection[GatewayParents]) krt.Collection[InferencePoolObject] {
	return krt.NewCollection(gatewayParents, func(ctx krt.HandlerContext, gp GatewayParents) *InferencePoolObject {
		pool := krt.FetchOne(ctx, b.pools, krt.FilterKey(gp.Pool.String()))
		if pool == nil {
			return nil
		}
		obj := &InferencePoolObject{Pool: *pool, Parents: gp.Parents}
		if ref := (*pool).Spec.EndpointPickerRef; ref != nil && ref.Name != "" {
			if svc := krt.FetchOne(ctx, b.in.Services, krt.FilterKey(gp.Pool.Namespace+"/"+string(ref.Name))); svc != nil {
				obj.EPP = *svc
				namespaces := func() []string {
					var out []string
					for _, p := range gp.Parents {
						if !slices.Contains(out, p.Gateway.Namespace) {
							out = append(out, p.Gateway.Namespace)
						}
					}
					return out
				}
				if resolve := b.tls.lookup(ctx, namespaces); resolve != nil && eppRefProblem(*pool, obj.EPP) == "" {
					obj.EPPTLS = resolve(servicePort(obj.EPP, int32(ref.Port.Number), serviceFQDN(obj.EPP.Name, obj.EPP.Namespace, b.opts.ClusterDomain)))
				}
			}
		}
		return obj
	}, b.with("InferencePools")...)
}

// poolStatusCollections are Outputs.PoolStatuses and
// Outputs.ShadowServices, from one derivation over the pools: every pool's
// status.parents entries, and a shadow Service for each pool some parent
// accepts (PoolAccepted).
func (b *builder) poolStatusCollections(pools krt.Collection[InferencePoolObject]) (krt.Collection[PoolStatus], krt.Collection[ShadowServiceApply]) {
	statuses, shadows := krt.NewStatusCollection(pools,
		func(ctx krt.HandlerContext, p InferencePoolObject) (*PoolStatus, *ShadowServiceApply) {
			st := &PoolStatus{Namespace: p.Pool.Namespace, Name: p.Pool.Name,
				Parents: PoolParentStatuses(p.Pool, p.Parents, p.EPP, p.EPPTLS, b.opts.ControllerName, metav1.Time{})}
			if !PoolAccepted(st.Parents) {
				return st, nil
			}
			svc := &ShadowServiceApply{Namespace: p.Pool.Namespace, Name: ShadowServiceName(p.Pool.Name), Apply: ShadowService(p.Pool)}
			return st, svc
		}, b.with("ShadowServices")...)
	poolStatuses := krt.NewCollection(statuses, func(ctx krt.HandlerContext, s krt.ObjectWithStatus[InferencePoolObject, PoolStatus]) *PoolStatus {
		return &s.Status
	}, b.with("PoolStatuses")...)
	return poolStatuses, shadows
}
