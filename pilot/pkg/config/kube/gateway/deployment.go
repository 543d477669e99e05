// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/bootstrap"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/writer"
)

// Labels, annotations and paths of Gateway deployments.
const (
	// GatewayNameLabel carries the Gateway's name on every object of its
	// deployment and on its pods; the Service and the Deployment select
	// pods by it (Gateway API's well-known label, as Istio uses it).
	GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"
	// GatewayClassNameLabel carries the Gateway's class name.
	GatewayClassNameLabel = "gateway.networking.k8s.io/gateway-class-name"
	// ServiceTypeAnnotation on a Gateway sets its Service's type:
	// ClusterIP, NodePort or LoadBalancer (default), as Istio reads it.
	ServiceTypeAnnotation = "networking.istio.io/service-type"
	// BootstrapHashAnnotation on the pod template is a hash of the bootstrap,
	// so that a changed bootstrap rolls the pods (Envoy reads it only at
	// start).
	BootstrapHashAnnotation = "infermesh.io/bootstrap-hash"
	// BootstrapKey is the bootstrap's key in the ConfigMap.
	BootstrapKey = "bootstrap.json"
	// BootstrapDir is where the ConfigMap is mounted; Envoy runs with
	// -c BootstrapDir/BootstrapKey.
	BootstrapDir = "/etc/envoy"
	// TokenDir holds the projected ServiceAccount token (file "token") sent
	// to ADS when ServiceAccount authentication is on.
	TokenDir = "/var/run/secrets/infermesh/xds"
	// TokenExpirationSeconds is the projected token's lifetime; the kubelet
	// replaces it after 80% of it.
	TokenExpirationSeconds = 3600
	// ProxyUID is the user and group the proxy runs as (distroless nonroot).
	ProxyUID = 65532
	// ProxyContainerName is the Envoy container's name.
	ProxyContainerName = "envoy"
	// StatusPortName names the status port (GET /healthz/ready) on the
	// Service and the container, as Istio names it.
	StatusPortName = "status-port"
)

// ProxyConfig is what every Gateway deployment shares
// (pilot/pkg/features; the CA bundle read from GatewayXDSCAFile).
type ProxyConfig struct {
	// ControllerName is our controller name; ManagedLabel's value derives
	// from it.
	ControllerName string
	// ClusterDomain builds the Service's hostname for status.addresses.
	ClusterDomain string
	// Image is the Envoy image.
	Image string
	// XDSAddress is pilot-discovery's ADS address, host:port.
	XDSAddress string
	// Plaintext, CABundle and ServiceAccountAuth are bootstrap.Config's
	// Plaintext, CABundle and (as the projected token's path) TokenPath.
	Plaintext          bool
	CABundle           []byte
	ServiceAccountAuth bool
	// TokenAudience is the audience the projected token is issued for
	// (features.GatewayXDSTokenAudience, which pilot-discovery's TokenReview
	// requires). Required with ServiceAccountAuth.
	TokenAudience string
}

// GatewayDeployment is the desired deployment of one Gateway: four objects
// of one name (the ConfigMap's has a "-bootstrap" suffix) in the Gateway's
// namespace, each labelled ManagedLabel and GatewayNameLabel and owned by
// the Gateway (ownerReference with controller=true).
type GatewayDeployment struct {
	// Gateway is the Gateway's namespace/name.
	Gateway        string
	Namespace      string
	Name           string
	ServiceAccount *corev1ac.ServiceAccountApplyConfiguration
	Service        *corev1ac.ServiceApplyConfiguration
	ConfigMap      *corev1ac.ConfigMapApplyConfiguration
	Deployment     *appsv1ac.DeploymentApplyConfiguration
}

// ResourceName is the Gateway's namespace/name.
func (d GatewayDeployment) ResourceName() string { return d.Gateway }

// Equals compares by value.
func (d GatewayDeployment) Equals(o GatewayDeployment) bool { return reflect.DeepEqual(d, o) }

// Desired types of the deployment writers.
type (
	ServiceAccountApply = writer.Desired[*corev1ac.ServiceAccountApplyConfiguration]
	ServiceApply        = writer.Desired[*corev1ac.ServiceApplyConfiguration]
	ConfigMapApply      = writer.Desired[*corev1ac.ConfigMapApplyConfiguration]
	DeploymentApply     = writer.Desired[*appsv1ac.DeploymentApplyConfiguration]
)

// DeploymentOutputs are the deployment collections: one GatewayDeployment
// per Gateway of ours that is in scope (DeploymentScope), and the four
// desired collections the writers consume.
type DeploymentOutputs struct {
	Deployments     krt.Collection[GatewayDeployment]
	ServiceAccounts krt.Collection[ServiceAccountApply]
	Services        krt.Collection[ServiceApply]
	ConfigMaps      krt.Collection[ConfigMapApply]
	Workloads       krt.Collection[DeploymentApply]
}

// BuildDeployments derives the deployments of the Gateways in gateways
// that are ours (present in ours, Outputs.Gateways) and in scope.
func BuildDeployments(gateways krt.Collection[*gwv1.Gateway], ours krt.Collection[GatewayView], cfg ProxyConfig,
	opts []krt.CollectionOption,
) DeploymentOutputs {
	with := func(name string) []krt.CollectionOption {
		return append(slices.Clone(opts), krt.WithName("gateway/"+name))
	}
	var out DeploymentOutputs
	out.Deployments = krt.NewCollection(gateways, func(ctx krt.HandlerContext, gw *gwv1.Gateway) *GatewayDeployment {
		view := krt.FetchOne(ctx, ours, krt.FilterKey(gw.Namespace+"/"+gw.Name))
		if view == nil || DeploymentScope(gw) != "" {
			return nil
		}
		d, err := DesiredDeployment(WithListenerSetPorts(gw, view), cfg)
		if err != nil {
			// Only an invalid ProxyConfig fails, which NewController
			// checks first.
			return nil
		}
		return d
	}, with("GatewayDeployments")...)
	out.ServiceAccounts = krt.NewCollection(out.Deployments, func(_ krt.HandlerContext, d GatewayDeployment) *ServiceAccountApply {
		return &ServiceAccountApply{Namespace: d.Namespace, Name: *d.ServiceAccount.Name, Apply: d.ServiceAccount}
	}, with("GatewayServiceAccounts")...)
	out.Services = krt.NewCollection(out.Deployments, func(_ krt.HandlerContext, d GatewayDeployment) *ServiceApply {
		return &ServiceApply{Namespace: d.Namespace, Name: *d.Service.Name, Apply: d.Service}
	}, with("GatewayServices")...)
	out.ConfigMaps = krt.NewCollection(out.Deployments, func(_ krt.HandlerContext, d GatewayDeployment) *ConfigMapApply {
		return &ConfigMapApply{Namespace: d.Namespace, Name: *d.ConfigMap.Name, Apply: d.ConfigMap}
	}, with("GatewayConfigMaps")...)
	out.Workloads = krt.NewCollection(out.Deployments, func(_ krt.HandlerContext, d GatewayDeployment) *DeploymentApply {
		return &DeploymentApply{Namespace: d.Namespace, Name: *d.Deployment.Name, Apply: d.Deployment}
	}, with("GatewayWorkloads")...)
	return out
}

// DeploymentName returns the name of a Gateway's Deployment, Service and
// ServiceAccount: "<gateway>-<class>", as Istio names them (Gateway
// "gateway" of class "istio" -> "gateway-istio"). A Service name is an RFC
// 1035 label of at most 63 characters: a longer name is cut to 54
// characters and "-" plus the first 8 hex digits of sha256 of the full name
// appended, so two long names with a common prefix still differ.
func DeploymentName(gateway, class string) string {
	name := gateway + "-" + class
	if len(name) <= maxServiceName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:maxServiceName-9] + "-" + hex.EncodeToString(sum[:])[:8]
}

// ProxyServiceAccount is the ServiceAccount a Gateway's proxies run as, in
// the Gateway's namespace: the one DesiredDeployment makes for it,
// DeploymentName(gateway, class). With ADS authorization on, only its
// tokens are accepted for the Gateway. No parameter names another one: a
// class's parametersRef ConfigMap holds only eppRequestBodyMode, and
// Gateway parameters (spec.infrastructure.parametersRef) are not
// implemented (classparams.go). A Gateway deployed by hand
// (PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER=false) must run its
// proxies under this name too.
func ProxyServiceAccount(gateway, class string) string { return DeploymentName(gateway, class) }

// BootstrapConfigMapName is the bootstrap ConfigMap's name.
func BootstrapConfigMapName(gateway, class string) string {
	return DeploymentName(gateway, class) + "-bootstrap"
}

// DeploymentScope returns "" when a Gateway of ours gets a deployment, or
// why it does not (the message of its Programmed=False/Invalid
// condition):
//   - spec.addresses holds an address that cannot be asked of a load
//     balancer (addresses.go; Istio's manual deployment, which names an
//     existing Service there as a Hostname address, is not supported);
//   - the Gateway's name is longer than 63 characters: it cannot be the
//     value of GatewayNameLabel.
func DeploymentScope(gw *gwv1.Gateway) string {
	switch {
	case gatewayAddressProblem(gw) != "":
		return gatewayAddressProblem(gw) + ": no deployment is made"
	case len(gw.Name) > maxServiceName:
		return fmt.Sprintf("the Gateway's name is longer than %d characters, the longest label value: no deployment is made", maxServiceName)
	}
	return ""
}

// WithListenerSetPorts returns gw with, after its own listeners, one
// listener for each port that only listeners of its accepted ListenerSets
// (view.ListenerSets) use, so that the Gateway's Service and the proxy's
// container expose it: named "listenerset-<port>" (a suffix added while
// that name is taken). gw is returned as is when there is none; it is
// never modified.
func WithListenerSetPorts(gw *gwv1.Gateway, view *GatewayView) *gwv1.Gateway {
	var extra []gwv1.Listener
	has := func(p gwv1.PortNumber) bool {
		return slices.ContainsFunc(gw.Spec.Listeners, func(l gwv1.Listener) bool { return l.Port == p }) ||
			slices.ContainsFunc(extra, func(l gwv1.Listener) bool { return l.Port == p })
	}
	taken := func(n gwv1.SectionName) bool {
		return slices.ContainsFunc(gw.Spec.Listeners, func(l gwv1.Listener) bool { return l.Name == n })
	}
	for _, ls := range view.ListenerSets {
		if !ls.Accepted() {
			continue
		}
		for _, l := range ls.Listeners {
			if !l.Served() || has(l.Port) {
				continue
			}
			name := gwv1.SectionName(fmt.Sprintf("listenerset-%d", l.Port))
			for i := 1; taken(name); i++ {
				name = gwv1.SectionName(fmt.Sprintf("listenerset-%d-%d", l.Port, i))
			}
			extra = append(extra, gwv1.Listener{Name: name, Port: l.Port, Protocol: l.Protocol})
		}
	}
	if len(extra) == 0 {
		return gw
	}
	out := gw.DeepCopy()
	out.Spec.Listeners = append(out.Spec.Listeners, extra...)
	return out
}

// deploymentPorts returns each distinct listener port once, in listener
// order, with the name of its first listener made a valid port name.
func deploymentPorts(gw *gwv1.Gateway) []gwv1.Listener {
	var out []gwv1.Listener
	for _, l := range gw.Spec.Listeners {
		if !slices.ContainsFunc(out, func(o gwv1.Listener) bool { return o.Port == l.Port }) {
			out = append(out, l)
		}
	}
	return out
}

// portName makes a listener name (a DNS subdomain) a Service port name (a
// DNS label of at most 63 characters); i is the listener's index, used
// when nothing is left.
func portName(l gwv1.Listener, i int) string {
	name := strings.ReplaceAll(string(l.Name), ".", "-")
	if len(name) > maxServiceName {
		name = name[:maxServiceName]
	}
	name = strings.Trim(name, "-")
	if name == "" {
		name = fmt.Sprintf("%s-%d", strings.ToLower(string(l.Protocol)), i)
	}
	return name
}

// serviceType reads ServiceTypeAnnotation; anything else than ClusterIP or
// NodePort is LoadBalancer, Istio's default.
func serviceType(gw *gwv1.Gateway) corev1.ServiceType {
	switch t := corev1.ServiceType(gw.Annotations[ServiceTypeAnnotation]); t {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		return t
	}
	return corev1.ServiceTypeLoadBalancer
}

// infrastructureMetadata is spec.infrastructure's labels and annotations
// as plain maps (empty when unset).
func infrastructureMetadata(gw *gwv1.Gateway) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	if inf := gw.Spec.Infrastructure; inf != nil {
		for k, v := range inf.Labels {
			labels[string(k)] = string(v)
		}
		for k, v := range inf.Annotations {
			annotations[string(k)] = string(v)
		}
	}
	return labels, annotations
}

// withDefaults returns ours with every key of extra it does not already
// have.
func withDefaults(ours, extra map[string]string) map[string]string {
	for k, v := range extra {
		if _, ok := ours[k]; !ok {
			ours[k] = v
		}
	}
	return ours
}

// DesiredDeployment returns the deployment of gw (a Gateway of ours in
// scope), in the form the API server stores (defaulted list keys such as
// port protocols are set), so that an unchanged recomputation writes
// nothing:
//   - ServiceAccount "<name>";
//   - Service "<name>": type from ServiceTypeAnnotation (LoadBalancer by
//     default), selector GatewayNameLabel, port 15021 "status-port"
//     (appProtocol tcp), then one TCP port per distinct listener port,
//     named after its first listener, appProtocol the lowercased listener
//     protocol, targetPort the same number (the proxy binds listener ports
//     as they are);
//   - ConfigMap "<name>-bootstrap" with BootstrapKey, the bootstrap
//     (pkg/bootstrap) naming the Gateway in node metadata;
//   - Deployment "<name>": one Envoy container (cfg.Image) started with
//     -c BootstrapDir/BootstrapKey and --service-node <pod>.<namespace>,
//     the ConfigMap mounted read-only, the projected token (audience
//     cfg.TokenAudience, so it is good for our ADS and nothing else) when
//     ServiceAccountAuth, the API token not mounted, non-root with
//     unprivileged ports from 0 (sysctl) so it can bind listener ports below
//     1024, readiness GET /healthz/ready on 15021. Replicas are left unset
//     (one by default) so that users and autoscalers can scale it.
//
// Each object carries ManagedLabel, GatewayNameLabel, GatewayClassNameLabel
// and an ownerReference to the Gateway (gateway.networking.k8s.io/v1,
// controller=true). The error is bootstrap.ErrInvalidConfig's, for an
// invalid cfg.
func DesiredDeployment(gw *gwv1.Gateway, cfg ProxyConfig) (*GatewayDeployment, error) {
	class := string(gw.Spec.GatewayClassName)
	name := DeploymentName(gw.Name, class)
	bc := bootstrap.Config{
		NodeID: name + "." + gw.Namespace, Cluster: name + "." + gw.Namespace,
		GatewayNamespace: gw.Namespace, GatewayName: gw.Name,
		XDSAddress: cfg.XDSAddress, Plaintext: cfg.Plaintext, CABundle: cfg.CABundle,
	}
	if cfg.ServiceAccountAuth {
		bc.TokenPath = TokenDir + "/token"
	}
	boot, err := bootstrap.JSON(bc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(boot)

	// spec.infrastructure's labels and annotations go on everything we
	// deploy for the Gateway, the pod template included (Gateway API
	// infrastructure propagation); our own keys win over them.
	infraLabels, infraAnnotations := infrastructureMetadata(gw)
	labels := withDefaults(map[string]string{
		ManagedLabel:          managedValue(cfg.ControllerName),
		GatewayNameLabel:      gw.Name,
		GatewayClassNameLabel: class,
	}, infraLabels)
	owner := metav1ac.OwnerReference().
		WithAPIVersion(gwv1.GroupVersion.String()).WithKind(GatewayKind).
		WithName(gw.Name).WithUID(gw.UID).WithController(true)
	selector := map[string]string{GatewayNameLabel: gw.Name}

	sa := corev1ac.ServiceAccount(name, gw.Namespace).WithLabels(labels).WithAnnotations(infraAnnotations).WithOwnerReferences(owner)

	svcSpec := corev1ac.ServiceSpec().WithType(serviceType(gw)).WithSelector(selector)
	if ips, _ := requestedAddresses(gw); len(ips) > 0 && serviceType(gw) == corev1.ServiceTypeLoadBalancer {
		// A Service asks its load balancer for one address; the others
		// are reported not usable (DeploymentProgrammed).
		svcSpec.WithLoadBalancerIP(ips[0].String())
	}
	svcSpec.WithPorts(corev1ac.ServicePort().WithName(StatusPortName).WithProtocol(corev1.ProtocolTCP).
		WithAppProtocol("tcp").WithPort(bootstrap.DefaultStatusPort).
		WithTargetPort(intstr.FromInt32(bootstrap.DefaultStatusPort)))
	container := corev1ac.Container().WithName(ProxyContainerName).WithImage(cfg.Image).
		WithArgs("-c", BootstrapDir+"/"+BootstrapKey, "--service-node", "$(POD_NAME).$(POD_NAMESPACE)").
		WithEnv(
			corev1ac.EnvVar().WithName("POD_NAME").WithValueFrom(corev1ac.EnvVarSource().
				WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath("metadata.name"))),
			corev1ac.EnvVar().WithName("POD_NAMESPACE").WithValueFrom(corev1ac.EnvVarSource().
				WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath("metadata.namespace"))),
		).
		WithPorts(corev1ac.ContainerPort().WithName(StatusPortName).WithContainerPort(bootstrap.DefaultStatusPort).
			WithProtocol(corev1.ProtocolTCP))
	for i, l := range deploymentPorts(gw) {
		port := int32(l.Port)
		svcSpec.WithPorts(corev1ac.ServicePort().WithName(portName(l, i)).WithProtocol(corev1.ProtocolTCP).
			WithAppProtocol(strings.ToLower(string(l.Protocol))).WithPort(port).WithTargetPort(intstr.FromInt32(port)))
		container.WithPorts(corev1ac.ContainerPort().WithContainerPort(port).WithProtocol(corev1.ProtocolTCP))
	}
	svc := corev1ac.Service(name, gw.Namespace).WithLabels(labels).WithAnnotations(infraAnnotations).WithOwnerReferences(owner).WithSpec(svcSpec)

	cmName := BootstrapConfigMapName(gw.Name, class)
	cm := corev1ac.ConfigMap(cmName, gw.Namespace).WithLabels(labels).WithAnnotations(infraAnnotations).WithOwnerReferences(owner).
		WithData(map[string]string{BootstrapKey: string(boot)})

	container.
		WithVolumeMounts(corev1ac.VolumeMount().WithName("bootstrap").WithMountPath(BootstrapDir).WithReadOnly(true)).
		WithReadinessProbe(corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath(bootstrap.ReadyPath).
				WithPort(intstr.FromInt32(bootstrap.DefaultStatusPort)).WithScheme(corev1.URISchemeHTTP)).
			WithTimeoutSeconds(1).WithPeriodSeconds(5).WithSuccessThreshold(1).WithFailureThreshold(3)).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).WithRunAsUser(ProxyUID).WithRunAsGroup(ProxyUID).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName("bootstrap").WithConfigMap(corev1ac.ConfigMapVolumeSource().
			WithName(cmName).WithDefaultMode(0o444)),
	}
	if cfg.ServiceAccountAuth {
		container.WithVolumeMounts(corev1ac.VolumeMount().WithName("xds-token").WithMountPath(TokenDir).WithReadOnly(true))
		volumes = append(volumes, corev1ac.Volume().WithName("xds-token").WithProjected(corev1ac.ProjectedVolumeSource().
			WithDefaultMode(0o444).
			WithSources(corev1ac.VolumeProjection().WithServiceAccountToken(corev1ac.ServiceAccountTokenProjection().
				WithPath("token").WithAudience(cfg.TokenAudience).WithExpirationSeconds(TokenExpirationSeconds)))))
	}
	podLabels := withDefaults(map[string]string{GatewayNameLabel: gw.Name, GatewayClassNameLabel: class}, infraLabels)
	podAnnotations := withDefaults(map[string]string{BootstrapHashAnnotation: hex.EncodeToString(sum[:])[:16]}, infraAnnotations)
	dep := appsv1ac.Deployment(name, gw.Namespace).WithLabels(labels).WithAnnotations(infraAnnotations).WithOwnerReferences(owner).
		WithSpec(appsv1ac.DeploymentSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(podLabels).
				WithAnnotations(podAnnotations).
				WithSpec(corev1ac.PodSpec().
					WithServiceAccountName(name).
					WithAutomountServiceAccountToken(false).
					WithSecurityContext(corev1ac.PodSecurityContext().
						WithSysctls(corev1ac.Sysctl().WithName("net.ipv4.ip_unprivileged_port_start").WithValue("0"))).
					WithContainers(container).
					WithVolumes(volumes...))))
	return &GatewayDeployment{
		Gateway: gw.Namespace + "/" + gw.Name, Namespace: gw.Namespace, Name: name,
		ServiceAccount: sa, Service: svc, ConfigMap: cm, Deployment: dep,
	}, nil
}
