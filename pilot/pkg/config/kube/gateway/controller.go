// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/apply"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/status"
	"github.com/infermesh/infermesh/pkg/kube/writer"
)

// ManagedLabel marks the objects the Gateway controller creates for itself
// (the default GatewayClass); its value is the controller name with "/"
// replaced by "-", as label values cannot hold "/". An object without it is
// never written.
const ManagedLabel = "gateway.istio.io/managed"

// ControllerConfig configures a Controller over a cluster.
type ControllerConfig struct {
	// Client gives the informer collections and the clients to write with.
	Client *kube.Client
	// Features are the feature flags (pilot/pkg/features).
	Features features.Features
	// Recorder records Warning events on InferencePools (a shadow Service
	// name taken by someone else's Service) and on routes with rules that
	// cannot be served; nil records none.
	Recorder record.EventRecorder
	// IsLeader gates every write (leaderelection.Elector.IsLeader).
	IsLeader func() bool
	// Krt are options for every derived collection.
	Krt []krt.CollectionOption
	// Serving is what the ADS server does not serve of each Gateway's
	// translation (pilot/pkg/xds Config.Serving); nil: nothing is read and
	// Programmed does not reflect it.
	Serving krt.Collection[model.GatewayServing]
}

// Controller is the Gateway API and InferencePool controller over a
// cluster: the collections of Build over the Client's informers, and the
// leader-gated writers that carry its results to the API server.
type Controller struct {
	Outputs
	// Deployments are the Gateway deployments; zero when
	// PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER is off.
	Deployments DeploymentOutputs
	// WrittenGatewayStatuses is the Gateway status the writer applies:
	// Outputs.GatewayStatuses, with the deployment's Programmed condition
	// and addresses when Gateway deployment is on, then Programmed=False/
	// Invalid for a Gateway the ADS server serves in part
	// (ServedGatewayStatuses over ControllerConfig.Serving).
	WrittenGatewayStatuses krt.Collection[GatewayStatusResult]
	// WrittenListenerSetStatuses is ListenerSetStatuses with the
	// Programmed conditions of WrittenGatewayStatuses applied
	// (WithListenerSetProgrammed): what the status writer applies.
	WrittenListenerSetStatuses krt.Collection[ListenerSetStatusResult]
	runs                       []func(ctx context.Context)
}

// NewController builds the pipeline and its writers. With
// PILOT_ENABLE_GATEWAY_API off it builds nothing; with
// ENABLE_GATEWAY_API_INFERENCE_EXTENSION off no InferencePool informer is
// created; with PILOT_ENABLE_GATEWAY_API_STATUS off no status is written
// (shadow Services, Gateway deployments and the default GatewayClass still
// are). With PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER on, each
// Gateway of ours gets its deployment (deployment.go) and its Programmed
// condition and addresses follow its Service (DeploymentProgrammed); the
// CA file PILOT_GATEWAY_XDS_CA_FILE is read here, and an unreadable file or
// an invalid proxy configuration is an error.
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Client == nil || cfg.IsLeader == nil {
		return nil, errors.New("gateway: ControllerConfig needs Client and IsLeader")
	}
	f := cfg.Features
	c := &Controller{}
	if !f.EnableGatewayAPI {
		return c, nil
	}
	kc := cfg.Client
	in := Inputs{
		GatewayClasses: kc.GatewayClasses(), Gateways: kc.Gateways(), HTTPRoutes: kc.HTTPRoutes(),
		GRPCRoutes: kc.GRPCRoutes(), TLSRoutes: kc.TLSRoutes(), TCPRoutes: kc.TCPRoutes(), ReferenceGrants: kc.ReferenceGrants(), Namespaces: kc.Namespaces(),
		Services: kc.Services(), ConfigMaps: kc.ConfigMaps(), Secrets: kc.Secrets(),
		BackendTLSPolicies: kc.BackendTLSPolicies(), DestinationRules: kc.DestinationRules(), ListenerSets: kc.ListenerSets(),
		ExternalProcessors: kc.ExternalProcessors(),
	}
	if f.EnableInferenceExtension {
		in.InferencePools = kc.InferencePools()
	}
	c.Outputs = Build(in, Options{
		ControllerName: f.ControllerName, ClusterDomain: f.ClusterDomain,
		InferenceEnabled: f.EnableInferenceExtension, Limits: LimitsOf(f), Krt: cfg.Krt, Logger: slog.Default(),
	})

	var errs []error
	add := func(run func(context.Context), err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		c.runs = append(c.runs, run)
	}
	add(defaultClassWriter(cfg))
	c.WrittenGatewayStatuses = c.GatewayStatuses
	if f.EnableGatewayDeployment {
		proxy, err := proxyConfig(f)
		if err != nil {
			return nil, err
		}
		c.Deployments = BuildDeployments(in.Gateways, c.Gateways, proxy, cfg.Krt)
		for _, w := range deploymentWriters(cfg, c.Deployments, in.Gateways) {
			add(w())
		}
		c.WrittenGatewayStatuses = DeployedGatewayStatuses(c.GatewayStatuses, in.Gateways, c.Gateways, in.Services, proxy, cfg.Krt)
	}
	if cfg.Serving != nil {
		c.WrittenGatewayStatuses = ServedGatewayStatuses(c.WrittenGatewayStatuses, cfg.Serving, cfg.Krt)
	}
	written := c.WrittenGatewayStatuses
	c.WrittenListenerSetStatuses = krt.NewCollection(c.ListenerSetStatuses, func(ctx krt.HandlerContext, ls ListenerSetStatusResult) *ListenerSetStatusResult {
		gw := krt.FetchOne(ctx, written, krt.FilterKey(ls.Gateway.String()))
		programmed := gw != nil && slices.ContainsFunc(gw.Status.Conditions, func(c metav1.Condition) bool {
			return c.Type == string(gwv1.GatewayConditionProgrammed) && c.Status == metav1.ConditionTrue
		})
		ls.Status = WithListenerSetProgrammed(ls.Status, programmed)
		return &ls
	}, append(slices.Clone(cfg.Krt), krt.WithName("gateway/WrittenListenerSetStatuses"))...)
	if in.InferencePools != nil {
		add(shadowServiceWriter(cfg, c.ShadowServices, in.InferencePools))
	}
	if f.EnableGatewayAPIStatus {
		add(classStatusWriter(cfg, c.ClassStatuses))
		add(gatewayStatusWriter(cfg, c.WrittenGatewayStatuses))
		add(listenerSetStatusWriter(cfg, c.WrittenListenerSetStatuses))
		add(httpRouteStatusWriter(cfg, c.HTTPRouteStatuses))
		add(grpcRouteStatusWriter(cfg, c.GRPCRouteStatuses))
		add(tlsRouteStatusWriter(cfg, c.TLSRouteStatuses))
		add(tcpRouteStatusWriter(cfg, c.TCPRouteStatuses))
		add(routeProblemEvents(cfg, c.Routes))
		if in.InferencePools != nil {
			add(poolStatusWriter(cfg, c.PoolStatuses))
		}
		add(backendTLSPolicyStatusWriter(cfg, c.BackendTLSPolicyStatuses))
		if c.ExternalProcessorStatuses != nil {
			add(processorStatusWriter(cfg, c.ExternalProcessorStatuses))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// ProxyServiceAccount returns the name of the ServiceAccount, in the
// Gateway's namespace, whose tokens authorize a proxy for Gateway
// namespace/name (ProxyServiceAccount of its name and class). ok is false
// when the Gateway is not one of ours (absent, or of a class we do not
// implement); synced is false while the Gateways are not all read yet,
// when the answer is not final.
func (c *Controller) ProxyServiceAccount(namespace, name string) (serviceAccount string, ok, synced bool) {
	if c.Gateways == nil {
		return "", false, true // Gateway API off: no Gateway is ours
	}
	v := c.Gateways.GetKey(namespace + "/" + name)
	if v == nil {
		return "", false, c.Gateways.HasSynced()
	}
	return ProxyServiceAccount(name, v.Class), true, true
}

// RunFunctions are the writers' loops: pass each to
// leaderelection.Elector.AddRunFunction (each runs once per leadership term).
func (c *Controller) RunFunctions() []func(ctx context.Context) { return c.runs }

// FieldManagers are the server-side apply field managers of the objects
// the controller applies: InferencePoolFieldManager (shadow Services) and
// the controller name (the default GatewayClass and Gateway deployments).
// A Client whose informers keep their entries (kube.WithAppliedFieldsOf)
// lets the writers find an unchanged object unchanged in the cache, so a
// leader's start makes no request per object it finds as desired.
func FieldManagers(f features.Features) []string {
	return []string{InferencePoolFieldManager, f.ControllerName}
}

func managedValue(controller string) string { return strings.ReplaceAll(controller, "/", "-") }

// defaultClassWriter creates the default GatewayClass
// (PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME) with our controllerName
// when it is missing, and recreates it if it is deleted, as istiod does. A
// class of that name that someone else created (without ManagedLabel) is
// left alone.
func defaultClassWriter(cfg ControllerConfig) (func(context.Context), error) {
	type ac = *gwv1ac.GatewayClassApplyConfiguration
	f := cfg.Features
	desired := krt.NewStaticCollection(nil, []writer.Desired[ac]{{
		Name: f.DefaultGatewayClassName,
		Apply: gwv1ac.GatewayClass(f.DefaultGatewayClassName).
			WithLabels(map[string]string{ManagedLabel: managedValue(f.ControllerName)}).
			WithSpec(gwv1ac.GatewayClassSpec().
				WithControllerName(gwv1.GatewayController(f.ControllerName)).
				WithDescription(defaultClassDescription)),
	}}, append(cfg.Krt, krt.WithName("gateway/DefaultGatewayClass"))...)
	api := cfg.Client.GatewayAPI().GatewayV1()
	w, err := writer.NewOwnedWriter(writer.OwnedConfig[*gwv1.GatewayClass, ac]{
		Name:    "default-gatewayclass",
		Desired: desired,
		Live:    cfg.Client.GatewayClasses(),
		Owned: &apply.Owned[*gwv1.GatewayClass, ac]{
			FieldManager: f.ControllerName, OwnerLabel: ManagedLabel, Extract: gwv1ac.ExtractGatewayClass,
		},
		Client:   func(string) apply.Client[*gwv1.GatewayClass, ac] { return api.GatewayClasses() },
		IsLeader: cfg.IsLeader,
	})
	if err != nil {
		return nil, err
	}
	return w.Run, nil
}

// shadowServiceWriter applies the shadow Services with field manager
// InferencePoolFieldManager. A Service of the same name without
// InferencePoolNameLabel is someone else's: it is left alone, logged, and a
// Warning event "ShadowServiceNameTaken" is recorded on the pool.
func shadowServiceWriter(cfg ControllerConfig, desired krt.Collection[ShadowServiceApply],
	pools krt.Collection[*inferencev1.InferencePool],
) (func(context.Context), error) {
	type ac = *corev1ac.ServiceApplyConfiguration
	core := cfg.Client.Kube().CoreV1()
	w, err := writer.NewOwnedWriter(writer.OwnedConfig[*corev1.Service, ac]{
		Name:    "shadow-services",
		Desired: desired,
		Live:    cfg.Client.Services(),
		Owned: &apply.Owned[*corev1.Service, ac]{
			FieldManager: InferencePoolFieldManager, OwnerLabel: InferencePoolNameLabel,
			Extract: corev1ac.ExtractService, Recorder: cfg.Recorder,
		},
		Client:   func(ns string) apply.Client[*corev1.Service, ac] { return core.Services(ns) },
		IsLeader: cfg.IsLeader,
		OnNotOwned: func(d *ShadowServiceApply, err error) {
			pool := d.Apply.Labels[InferencePoolNameLabel]
			slog.Warn("gateway: shadow Service name is taken by a Service we do not own; the pool gets no shadow Service",
				"pool", d.Namespace+"/"+pool, "service", d.ResourceName())
			if cfg.Recorder == nil {
				return
			}
			if p := pools.GetKey(d.Namespace + "/" + pool); p != nil {
				// Informer objects carry no kind; the event's reference
				// needs it, and the recorder's scheme may not know GIE types.
				obj := (*p).DeepCopy()
				obj.APIVersion, obj.Kind = inferencev1.GroupVersion.String(), InferencePoolKind
				cfg.Recorder.Eventf(obj, corev1.EventTypeWarning, "ShadowServiceNameTaken",
					"Service %s exists without the %s label; it is not ours, so it was left alone and the pool has no shadow Service",
					d.ResourceName(), InferencePoolNameLabel)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return w.Run, nil
}

// RouteParentAccess reads Gateway API route status.parents entries for
// status.MergeParents: an entry is identified by its parentRef.
var RouteParentAccess = status.ParentAccess[gwv1.RouteParentStatus]{
	Controller: func(p *gwv1.RouteParentStatus) string { return string(p.ControllerName) },
	Key: func(p *gwv1.RouteParentStatus) string {
		r := p.ParentRef
		return fmt.Sprintf("%s/%s/%s/%s/%s/%d", ptr.Deref(r.Group, GatewayGroup), ptr.Deref(r.Kind, GatewayKind),
			ptr.Deref(r.Namespace, ""), r.Name, ptr.Deref(r.SectionName, ""), ptr.Deref(r.Port, 0))
	},
	Conditions: func(p *gwv1.RouteParentStatus) *[]metav1.Condition { return &p.Conditions },
}

// PoolParentAccess reads GIE InferencePool status.parents entries.
var PoolParentAccess = status.ParentAccess[inferencev1.ParentStatus]{
	Controller: func(p *inferencev1.ParentStatus) string { return string(p.ControllerName) },
	Key: func(p *inferencev1.ParentStatus) string {
		r := p.ParentRef
		return fmt.Sprintf("%s/%s/%s/%s", ptr.Deref(r.Group, GatewayGroup), r.Kind, r.Namespace, r.Name)
	},
	Conditions: func(p *inferencev1.ParentStatus) *[]metav1.Condition { return &p.Conditions },
}

// statusObjectClient is the part of a typed client-go client that a shared
// status writer uses.
type statusObjectClient[O any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (O, error)
	UpdateStatus(ctx context.Context, obj O, opts metav1.UpdateOptions) (O, error)
}

// sharedStatusWriter writes our entries of the status.parents lists of one
// kind O, read with parents and replaced with withParents (on a copy).
func sharedStatusWriter[O apply.Object, P any](cfg ControllerConfig, name string, desired krt.Collection[writer.DesiredStatus[P]],
	live krt.Collection[O], access status.ParentAccess[P], client func(ns string) statusObjectClient[O],
	parents func(O) []P, withParents func(O, []P) O,
) (func(context.Context), error) {
	manager := metav1.UpdateOptions{FieldManager: cfg.Features.ControllerName}
	w, err := writer.NewStatusWriter(writer.StatusConfig[O, P]{
		Name: name, Desired: desired, Live: live, Controller: cfg.Features.ControllerName, Access: access,
		Get: func(ctx context.Context, ns, name string) (O, error) {
			return client(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Parents:     parents,
		WithParents: withParents,
		UpdateStatus: func(ctx context.Context, obj O) error {
			_, err := client(obj.GetNamespace()).UpdateStatus(ctx, obj, manager)
			return err
		},
		IsLeader: cfg.IsLeader,
	})
	if err != nil {
		return nil, err
	}
	return w.Run, nil
}

func httpRouteStatusWriter(cfg ControllerConfig, desired krt.Collection[RouteStatus]) (func(context.Context), error) {
	api := cfg.Client.GatewayAPI().GatewayV1()
	return sharedStatusWriter(cfg, "httproute-status", desired, cfg.Client.HTTPRoutes(), RouteParentAccess,
		func(ns string) statusObjectClient[*gwv1.HTTPRoute] { return api.HTTPRoutes(ns) },
		func(r *gwv1.HTTPRoute) []gwv1.RouteParentStatus { return r.Status.Parents },
		func(r *gwv1.HTTPRoute, p []gwv1.RouteParentStatus) *gwv1.HTTPRoute {
			r = r.DeepCopy()
			r.Status.Parents = p
			return r
		})
}

func grpcRouteStatusWriter(cfg ControllerConfig, desired krt.Collection[RouteStatus]) (func(context.Context), error) {
	api := cfg.Client.GatewayAPI().GatewayV1()
	return sharedStatusWriter(cfg, "grpcroute-status", desired, cfg.Client.GRPCRoutes(), RouteParentAccess,
		func(ns string) statusObjectClient[*gwv1.GRPCRoute] { return api.GRPCRoutes(ns) },
		func(r *gwv1.GRPCRoute) []gwv1.RouteParentStatus { return r.Status.Parents },
		func(r *gwv1.GRPCRoute, p []gwv1.RouteParentStatus) *gwv1.GRPCRoute {
			r = r.DeepCopy()
			r.Status.Parents = p
			return r
		})
}

func tlsRouteStatusWriter(cfg ControllerConfig, desired krt.Collection[RouteStatus]) (func(context.Context), error) {
	api := cfg.Client.GatewayAPI().GatewayV1()
	return sharedStatusWriter(cfg, "tlsroute-status", desired, cfg.Client.TLSRoutes(), RouteParentAccess,
		func(ns string) statusObjectClient[*gwv1.TLSRoute] { return api.TLSRoutes(ns) },
		func(r *gwv1.TLSRoute) []gwv1.RouteParentStatus { return r.Status.Parents },
		func(r *gwv1.TLSRoute, p []gwv1.RouteParentStatus) *gwv1.TLSRoute {
			r = r.DeepCopy()
			r.Status.Parents = p
			return r
		})
}

func tcpRouteStatusWriter(cfg ControllerConfig, desired krt.Collection[RouteStatus]) (func(context.Context), error) {
	api := cfg.Client.GatewayAPI().GatewayV1()
	return sharedStatusWriter(cfg, "tcproute-status", desired, cfg.Client.TCPRoutes(), RouteParentAccess,
		func(ns string) statusObjectClient[*gwv1.TCPRoute] { return api.TCPRoutes(ns) },
		func(r *gwv1.TCPRoute) []gwv1.RouteParentStatus { return r.Status.Parents },
		func(r *gwv1.TCPRoute, p []gwv1.RouteParentStatus) *gwv1.TCPRoute {
			r = r.DeepCopy()
			r.Status.Parents = p
			return r
		})
}

func poolStatusWriter(cfg ControllerConfig, desired krt.Collection[PoolStatus]) (func(context.Context), error) {
	api := cfg.Client.Inference().InferenceV1()
	return sharedStatusWriter(cfg, "inferencepool-status", desired, cfg.Client.InferencePools(), PoolParentAccess,
		func(ns string) statusObjectClient[*inferencev1.InferencePool] { return api.InferencePools(ns) },
		func(p *inferencev1.InferencePool) []inferencev1.ParentStatus { return p.Status.Parents },
		func(p *inferencev1.InferencePool, ps []inferencev1.ParentStatus) *inferencev1.InferencePool {
			p = p.DeepCopy()
			p.Status.Parents = ps
			return p
		})
}

// PolicyAncestorAccess reads Gateway API policy status.ancestors entries:
// an entry is identified by its ancestorRef.
var PolicyAncestorAccess = status.ParentAccess[gwv1.PolicyAncestorStatus]{
	Controller: func(p *gwv1.PolicyAncestorStatus) string { return string(p.ControllerName) },
	Key: func(p *gwv1.PolicyAncestorStatus) string {
		r := p.AncestorRef
		return fmt.Sprintf("%s/%s/%s/%s/%s/%d", ptr.Deref(r.Group, GatewayGroup), ptr.Deref(r.Kind, GatewayKind),
			ptr.Deref(r.Namespace, ""), r.Name, ptr.Deref(r.SectionName, ""), ptr.Deref(r.Port, 0))
	},
	Conditions: func(p *gwv1.PolicyAncestorStatus) *[]metav1.Condition { return &p.Conditions },
}

func backendTLSPolicyStatusWriter(cfg ControllerConfig, desired krt.Collection[BackendTLSPolicyStatus]) (func(context.Context), error) {
	api := cfg.Client.GatewayAPI().GatewayV1()
	return sharedStatusWriter(cfg, "backendtlspolicy-status", desired, cfg.Client.BackendTLSPolicies(), PolicyAncestorAccess,
		func(ns string) statusObjectClient[*gwv1.BackendTLSPolicy] { return api.BackendTLSPolicies(ns) },
		func(p *gwv1.BackendTLSPolicy) []gwv1.PolicyAncestorStatus { return p.Status.Ancestors },
		func(p *gwv1.BackendTLSPolicy, a []gwv1.PolicyAncestorStatus) *gwv1.BackendTLSPolicy {
			p = p.DeepCopy()
			p.Status.Ancestors = a
			return p
		})
}

func classStatusWriter(cfg ControllerConfig, desired krt.Collection[ClassStatus]) (func(context.Context), error) {
	type ac = *gwv1ac.GatewayClassApplyConfiguration
	api := cfg.Client.GatewayAPI().GatewayV1()
	w, err := writer.NewOwnedStatusWriter(writer.OwnedStatusConfig[*gwv1.GatewayClass, ClassStatus, ac]{
		Name: "gatewayclass-status", Desired: desired, Live: cfg.Client.GatewayClasses(),
		Status: apply.OwnedStatus[*gwv1.GatewayClass, ac]{
			FieldManager: cfg.Features.ControllerName, ExtractStatus: gwv1ac.ExtractGatewayClassStatus,
		},
		Client: func(string) apply.StatusClient[*gwv1.GatewayClass, ac] { return api.GatewayClasses() },
		Build: func(live *gwv1.GatewayClass, d ClassStatus) (ac, error) {
			conds := stampConditions([]metav1.Condition{d.Condition}, live.Status.Conditions)
			st := gwv1ac.GatewayClassStatus()
			if err := convertJSON(gwv1.GatewayClassStatus{Conditions: conds, SupportedFeatures: SupportedFeatures}, st); err != nil {
				return nil, err
			}
			return gwv1ac.GatewayClass(live.Name).WithStatus(st), nil
		},
		IsLeader: cfg.IsLeader,
	})
	if err != nil {
		return nil, err
	}
	return w.Run, nil
}

func gatewayStatusWriter(cfg ControllerConfig, desired krt.Collection[GatewayStatusResult]) (func(context.Context), error) {
	type ac = *gwv1ac.GatewayApplyConfiguration
	api := cfg.Client.GatewayAPI().GatewayV1()
	w, err := writer.NewOwnedStatusWriter(writer.OwnedStatusConfig[*gwv1.Gateway, GatewayStatusResult, ac]{
		Name: "gateway-status", Desired: desired, Live: cfg.Client.Gateways(),
		Status: apply.OwnedStatus[*gwv1.Gateway, ac]{
			FieldManager: cfg.Features.ControllerName, ExtractStatus: gwv1ac.ExtractGatewayStatus,
		},
		Client: func(ns string) apply.StatusClient[*gwv1.Gateway, ac] { return api.Gateways(ns) },
		Build: func(live *gwv1.Gateway, d GatewayStatusResult) (ac, error) {
			st := d.Status
			st.Conditions = stampConditions(st.Conditions, live.Status.Conditions)
			st.Listeners = make([]gwv1.ListenerStatus, len(d.Status.Listeners))
			for i, l := range d.Status.Listeners {
				var liveConds []metav1.Condition
				for _, ll := range live.Status.Listeners {
					if ll.Name == l.Name {
						liveConds = ll.Conditions
					}
				}
				l.Conditions = stampConditions(l.Conditions, liveConds)
				st.Listeners[i] = l
			}
			out := gwv1ac.GatewayStatus()
			if err := convertJSON(st, out); err != nil {
				return nil, err
			}
			return gwv1ac.Gateway(live.Name, live.Namespace).WithStatus(out), nil
		},
		IsLeader: cfg.IsLeader,
	})
	if err != nil {
		return nil, err
	}
	return w.Run, nil
}

// stampConditions returns desired (whose lastTransitionTime is zero) with
// each condition's time taken from the live condition of the same type when
// its status is unchanged, and now otherwise.
// listenerSetStatusWriter applies the status of each ListenerSet of our
// Gateways, as the Gateway's: the status is ours alone (server-side apply,
// our field manager), conditions keep their live lastTransitionTime while
// unchanged.
func listenerSetStatusWriter(cfg ControllerConfig, desired krt.Collection[ListenerSetStatusResult]) (func(context.Context), error) {
	type ac = *gwv1ac.ListenerSetApplyConfiguration
	api := cfg.Client.GatewayAPI().GatewayV1()
	w, err := writer.NewOwnedStatusWriter(writer.OwnedStatusConfig[*gwv1.ListenerSet, ListenerSetStatusResult, ac]{
		Name: "listenerset-status", Desired: desired, Live: cfg.Client.ListenerSets(),
		Status: apply.OwnedStatus[*gwv1.ListenerSet, ac]{
			FieldManager: cfg.Features.ControllerName, ExtractStatus: gwv1ac.ExtractListenerSetStatus,
		},
		Client: func(ns string) apply.StatusClient[*gwv1.ListenerSet, ac] { return api.ListenerSets(ns) },
		Build: func(live *gwv1.ListenerSet, d ListenerSetStatusResult) (ac, error) {
			st := *d.Status.DeepCopy()
			st.Conditions = stampConditions(st.Conditions, live.Status.Conditions)
			for i := range st.Listeners {
				var liveConds []metav1.Condition
				for _, ll := range live.Status.Listeners {
					if ll.Name == st.Listeners[i].Name {
						liveConds = ll.Conditions
					}
				}
				st.Listeners[i].Conditions = stampConditions(st.Listeners[i].Conditions, liveConds)
			}
			out := gwv1ac.ListenerSetStatus()
			if err := convertJSON(st, out); err != nil {
				return nil, err
			}
			return gwv1ac.ListenerSet(live.Name, live.Namespace).WithStatus(out), nil
		},
		IsLeader: cfg.IsLeader,
	})
	if err != nil {
		return nil, err
	}
	return w.Run, nil
}

func stampConditions(desired, live []metav1.Condition) []metav1.Condition {
	return status.KeepTransitionTimes(status.StampTransitionTimes(desired, metav1.Now()), live)
}

// convertJSON fills the apply configuration out from the typed value in:
// apply configurations mirror the types' JSON, and client-go has no
// converter between the two.
func convertJSON(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
