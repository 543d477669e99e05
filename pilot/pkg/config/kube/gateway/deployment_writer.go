// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/bootstrap"
	"github.com/infermesh/infermesh/pkg/kube/apply"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/writer"
)

// proxyConfig reads the Gateway proxy settings from the feature flags and
// the CA file, and checks that they make a valid bootstrap.
func proxyConfig(f features.Features) (ProxyConfig, error) {
	p := ProxyConfig{
		ControllerName: f.ControllerName, ClusterDomain: f.ClusterDomain, Image: f.GatewayProxyImage,
		XDSAddress: f.GatewayXDSAddress, Plaintext: f.GatewayXDSPlaintext, ServiceAccountAuth: f.GatewayXDSServiceAccountAuth,
		TokenAudience: f.GatewayXDSTokenAudience,
	}
	if f.GatewayXDSCAFile != "" && !p.Plaintext {
		b, err := os.ReadFile(f.GatewayXDSCAFile)
		if err != nil {
			return p, fmt.Errorf("gateway: PILOT_GATEWAY_XDS_CA_FILE: %w", err)
		}
		p.CABundle = b
	}
	probe := bootstrap.Config{NodeID: "probe", Cluster: "probe", GatewayNamespace: "probe", GatewayName: "probe",
		XDSAddress: p.XDSAddress, Plaintext: p.Plaintext, CABundle: p.CABundle}
	if p.ServiceAccountAuth {
		probe.TokenPath = TokenDir + "/token"
	}
	if _, err := bootstrap.Build(probe); err != nil {
		return p, fmt.Errorf("gateway: Gateway proxy settings (PILOT_GATEWAY_XDS_*): %w", err)
	}
	if p.ServiceAccountAuth && p.TokenAudience == "" {
		return p, errors.New("gateway: Gateway proxy settings: PILOT_GATEWAY_XDS_SERVICEACCOUNT_AUTH needs a token audience (PILOT_GATEWAY_XDS_TOKEN_AUDIENCE)")
	}
	return p, nil
}

// deploymentWriters returns the constructors of the four writers of Gateway
// deployments, all with field manager ControllerName and ownership label
// ManagedLabel. An object of a deployment's name without ManagedLabel is
// someone else's: it is left alone, logged, and a Warning event
// "DeploymentNameTaken" is recorded on the Gateway. Services and
// ConfigMaps are watched (drift is repaired at once); ServiceAccounts and
// Deployments have no informer here and are repaired at the next change of
// the desired object or leadership term.
func deploymentWriters(cfg ControllerConfig, d DeploymentOutputs, gateways krt.Collection[*gwv1.Gateway],
) []func() (func(context.Context), error) {
	core := cfg.Client.Kube().CoreV1()
	apps := cfg.Client.Kube().AppsV1()
	return []func() (func(context.Context), error){
		func() (func(context.Context), error) {
			type ac = *corev1ac.ServiceAccountApplyConfiguration
			return ownedRun(cfg, "gateway-serviceaccounts", d.ServiceAccounts, nil, corev1ac.ExtractServiceAccount,
				func(ns string) apply.Client[*corev1.ServiceAccount, ac] { return core.ServiceAccounts(ns) }, gateways, "ServiceAccount",
				func(a ac) map[string]string { return a.Labels })
		},
		func() (func(context.Context), error) {
			type ac = *corev1ac.ServiceApplyConfiguration
			return ownedRun(cfg, "gateway-services", d.Services, cfg.Client.Services(), corev1ac.ExtractService,
				func(ns string) apply.Client[*corev1.Service, ac] { return core.Services(ns) }, gateways, "Service",
				func(a ac) map[string]string { return a.Labels })
		},
		func() (func(context.Context), error) {
			type ac = *corev1ac.ConfigMapApplyConfiguration
			return ownedRun(cfg, "gateway-configmaps", d.ConfigMaps, cfg.Client.ConfigMaps(), corev1ac.ExtractConfigMap,
				func(ns string) apply.Client[*corev1.ConfigMap, ac] { return core.ConfigMaps(ns) }, gateways, "ConfigMap",
				func(a ac) map[string]string { return a.Labels })
		},
		func() (func(context.Context), error) {
			type ac = *appsv1ac.DeploymentApplyConfiguration
			return ownedRun(cfg, "gateway-deployments", d.Workloads, nil, appsv1ac.ExtractDeployment,
				func(ns string) apply.Client[*appsv1.Deployment, ac] { return apps.Deployments(ns) }, gateways, "Deployment",
				func(a ac) map[string]string { return a.Labels })
		},
	}
}

// ownedRun builds one OwnedWriter of a Gateway deployment's objects of
// kind O.
func ownedRun[O apply.Object, AC any](cfg ControllerConfig, name string,
	desired krt.Collection[writer.Desired[AC]], live krt.Collection[O], extract func(O, string) (AC, error),
	client func(string) apply.Client[O, AC], gateways krt.Collection[*gwv1.Gateway], kind string,
	labels func(AC) map[string]string,
) (func(context.Context), error) {
	w, err := writer.NewOwnedWriter(writer.OwnedConfig[O, AC]{
		Name:    name,
		Desired: desired,
		Live:    live,
		Owned: &apply.Owned[O, AC]{
			FieldManager: cfg.Features.ControllerName, OwnerLabel: ManagedLabel, Extract: extract, Recorder: cfg.Recorder,
		},
		Client:   client,
		IsLeader: cfg.IsLeader,
		OnNotOwned: func(d *writer.Desired[AC], _ error) {
			gwName := labels(d.Apply)[GatewayNameLabel]
			slog.Warn("gateway: a deployment object's name is taken by an object we do not own; leaving it alone",
				"gateway", d.Namespace+"/"+gwName, "kind", kind, "name", d.Name)
			if cfg.Recorder == nil {
				return
			}
			if g := gateways.GetKey(d.Namespace + "/" + gwName); g != nil {
				obj := (*g).DeepCopy()
				obj.APIVersion, obj.Kind = gwv1.GroupVersion.String(), GatewayKind
				cfg.Recorder.Eventf(obj, corev1.EventTypeWarning, "DeploymentNameTaken",
					"%s %s exists without the %s label; it is not ours, so it was left alone",
					kind, d.Name, ManagedLabel)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return w.Run, nil
}
