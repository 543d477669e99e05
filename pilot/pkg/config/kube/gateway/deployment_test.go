// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/poll"
)

func testProxy() ProxyConfig {
	return ProxyConfig{ControllerName: controller, ClusterDomain: "cluster.local", Image: "envoy:test",
		XDSAddress: "pilot-discovery.infermesh-system.svc:15010", Plaintext: true}
}

func deployedSeed() *gwv1.Gateway {
	gw := seedGateway()
	gw.UID = types.UID("6cf9dd97-uid")
	return gw
}

func TestDeploymentName(t *testing.T) {
	if got := DeploymentName("gateway", "istio"); got != "gateway-istio" {
		t.Errorf("seed name = %q, want gateway-istio (pod gateway-istio-6cf9dd97dd-8lrn4)", got)
	}
	long := strings.Repeat("g", 60)
	a, b := DeploymentName(long, "istio"), DeploymentName(long, "istio2")
	if len(a) != 63 || len(b) != 63 || a == b || !strings.HasPrefix(a, long[:54]+"-") {
		t.Errorf("long names %q, %q: want 63 characters each, distinct, the prefix kept", a, b)
	}
	if n := DeploymentName(strings.Repeat("g", 57), "istio"); n != strings.Repeat("g", 57)+"-istio" {
		t.Errorf("a 63-character name is changed: %q", n)
	}
}

// TestDeploymentAsksForTheStaticAddress: the first IPAddress of
// spec.addresses is asked of the load balancer (spec.loadBalancerIP); a
// Gateway without addresses, or whose Service is not a LoadBalancer, asks
// none.
func TestDeploymentAsksForTheStaticAddress(t *testing.T) {
	lbIP := func(gw *gwv1.Gateway) string {
		t.Helper()
		d, err := DesiredDeployment(gw, testProxy())
		if err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(d.Service.Spec.LoadBalancerIP, "")
	}
	gw := deployedSeed()
	if ip := lbIP(gw); ip != "" {
		t.Errorf("no addresses: loadBalancerIP %q", ip)
	}
	gw.Spec.Addresses = []gwv1.GatewaySpecAddress{{Value: "10.0.0.1"}, {Type: ptr.To(gwv1.IPAddressType), Value: "10.0.0.2"}}
	if ip := lbIP(gw); ip != "10.0.0.1" {
		t.Errorf("loadBalancerIP %q, want the first address", ip)
	}
	gw.Annotations = map[string]string{ServiceTypeAnnotation: string(corev1.ServiceTypeClusterIP)}
	if ip := lbIP(gw); ip != "" {
		t.Errorf("ClusterIP Service: loadBalancerIP %q", ip)
	}
}

func TestDeploymentScope(t *testing.T) {
	gw := seedGateway()
	if s := DeploymentScope(gw); s != "" {
		t.Errorf("seed out of scope: %s", s)
	}
	gw.Spec.Addresses = []gwv1.GatewaySpecAddress{{Value: "10.0.0.1"}}
	if s := DeploymentScope(gw); s != "" {
		t.Errorf("Gateway with an IP address out of scope: %s", s)
	}
	gw.Spec.Addresses = []gwv1.GatewaySpecAddress{{Type: ptr.To(gwv1.HostnameAddressType), Value: "gw.example.com"}}
	if s := DeploymentScope(gw); !strings.Contains(s, "spec.addresses") {
		t.Errorf("Gateway with a Hostname address: %q", s)
	}
	gw = seedGateway()
	gw.Name = strings.Repeat("n", 64)
	if DeploymentScope(gw) == "" {
		t.Error("Gateway with a 64-character name is in scope")
	}
}

func TestDesiredDeploymentObjects(t *testing.T) {
	d, err := DesiredDeployment(deployedSeed(), testProxy())
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{ManagedLabel: managedValue(controller), GatewayNameLabel: "gateway", GatewayClassNameLabel: "istio"}
	wantOwner := []metav1ac.OwnerReferenceApplyConfiguration{*metav1ac.OwnerReference().
		WithAPIVersion("gateway.networking.k8s.io/v1").WithKind("Gateway").WithName("gateway").
		WithUID("6cf9dd97-uid").WithController(true)}
	type meta struct {
		Name, Namespace string
		Labels          map[string]string
		Owners          []metav1ac.OwnerReferenceApplyConfiguration
	}
	got := []meta{
		{*d.ServiceAccount.Name, *d.ServiceAccount.Namespace, d.ServiceAccount.Labels, d.ServiceAccount.OwnerReferences},
		{*d.Service.Name, *d.Service.Namespace, d.Service.Labels, d.Service.OwnerReferences},
		{*d.ConfigMap.Name, *d.ConfigMap.Namespace, d.ConfigMap.Labels, d.ConfigMap.OwnerReferences},
		{*d.Deployment.Name, *d.Deployment.Namespace, d.Deployment.Labels, d.Deployment.OwnerReferences},
	}
	want := []meta{
		{"gateway-istio", "gateway-namespace", wantLabels, wantOwner},
		{"gateway-istio", "gateway-namespace", wantLabels, wantOwner},
		{"gateway-istio-bootstrap", "gateway-namespace", wantLabels, wantOwner},
		{"gateway-istio", "gateway-namespace", wantLabels, wantOwner},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("metadata (-want +got):\n%s", diff)
	}

	svc := d.Service.Spec
	if *svc.Type != corev1.ServiceTypeLoadBalancer || !cmp.Equal(svc.Selector, map[string]string{GatewayNameLabel: "gateway"}) {
		t.Errorf("Service type %v selector %v, want LoadBalancer selecting the gateway-name label", *svc.Type, svc.Selector)
	}
	var ports []string
	for _, p := range svc.Ports {
		ports = append(ports, strings.Join([]string{*p.Name, string(*p.Protocol), *p.AppProtocol, p.TargetPort.String()}, "/")+
			":"+jsonOf(t, *p.Port))
	}
	if diff := cmp.Diff([]string{"status-port/TCP/tcp/15021:15021", "http/TCP/http/80:80"}, ports); diff != "" {
		t.Errorf("Service ports (-want +got):\n%s", diff)
	}

	pod := d.Deployment.Spec.Template
	if !cmp.Equal(d.Deployment.Spec.Selector.MatchLabels, map[string]string{GatewayNameLabel: "gateway"}) ||
		pod.Labels[GatewayNameLabel] != "gateway" {
		t.Errorf("selector %v, pod labels %v", d.Deployment.Spec.Selector.MatchLabels, pod.Labels)
	}
	if d.Deployment.Spec.Replicas != nil {
		t.Error("replicas set: a user's or autoscaler's scale would be undone")
	}
	ps := pod.Spec
	if *ps.ServiceAccountName != "gateway-istio" || *ps.AutomountServiceAccountToken {
		t.Errorf("serviceAccountName %q automount %v", *ps.ServiceAccountName, *ps.AutomountServiceAccountToken)
	}
	c := ps.Containers[0]
	if *c.Image != "envoy:test" || !cmp.Equal(c.Args, []string{"-c", "/etc/envoy/bootstrap.json", "--service-node", "$(POD_NAME).$(POD_NAMESPACE)"}) {
		t.Errorf("container image %q args %v", *c.Image, c.Args)
	}
	if len(c.VolumeMounts) != 1 || *c.VolumeMounts[0].MountPath != BootstrapDir || *ps.Volumes[0].ConfigMap.Name != "gateway-istio-bootstrap" {
		t.Errorf("bootstrap mount %v volumes %v", c.VolumeMounts, ps.Volumes)
	}
	if *c.ReadinessProbe.HTTPGet.Path != "/healthz/ready" || c.ReadinessProbe.HTTPGet.Port.IntValue() != 15021 {
		t.Errorf("readiness probe %v", c.ReadinessProbe.HTTPGet)
	}
	if pod.Annotations[BootstrapHashAnnotation] == "" {
		t.Error("no bootstrap hash on the pod template")
	}

	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal([]byte(d.ConfigMap.Data[BootstrapKey]), &b); err != nil {
		t.Fatal(err)
	}
	md := b.Node.Metadata.Fields
	if md["GATEWAY_NAMESPACE"].GetStringValue() != "gateway-namespace" || md["GATEWAY_NAME"].GetStringValue() != "gateway" ||
		b.Node.Cluster != "gateway-istio.gateway-namespace" {
		t.Errorf("bootstrap node = %v", b.Node)
	}
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDesiredDeploymentVariants(t *testing.T) {
	// Five listeners on three ports: one Service and container port each,
	// named after the first listener of the port.
	gw := multiGateway()
	gw.Annotations = map[string]string{ServiceTypeAnnotation: "ClusterIP"}
	d, err := DesiredDeployment(gw, testProxy())
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, p := range d.Service.Spec.Ports {
		ports = append(ports, *p.Name+"="+jsonOf(t, *p.Port))
	}
	var want []string
	seen := map[gwv1.PortNumber]bool{}
	for _, l := range gw.Spec.Listeners {
		if !seen[l.Port] {
			seen[l.Port] = true
			want = append(want, string(l.Name)+"="+jsonOf(t, l.Port))
		}
	}
	if diff := cmp.Diff(append([]string{"status-port=15021"}, want...), ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	if *d.Service.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("type %v, want the annotation's ClusterIP", *d.Service.Spec.Type)
	}
	if n := len(d.Deployment.Spec.Template.Spec.Containers[0].Ports); n != len(want)+1 {
		t.Errorf("%d container ports, want %d", n, len(want)+1)
	}

	// ServiceAccount authentication: a projected token, and the bootstrap
	// reads it.
	cfg := testProxy()
	cfg.Plaintext, cfg.ServiceAccountAuth, cfg.CABundle, cfg.TokenAudience = false, true, []byte("pem"), "infermesh"
	d, err = DesiredDeployment(deployedSeed(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	vols := d.Deployment.Spec.Template.Spec.Volumes
	if len(vols) != 2 || *vols[1].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds != TokenExpirationSeconds {
		t.Fatalf("volumes = %v, want the bootstrap and a projected token", vols)
	}
	// The token is for our ADS alone: issued for our audience, which the
	// TokenReview requires, not the API server's.
	if aud := vols[1].Projected.Sources[0].ServiceAccountToken.Audience; aud == nil || *aud != "infermesh" {
		t.Errorf("projected token audience = %v, want infermesh", aud)
	}
	if sa := *d.Deployment.Spec.Template.Spec.ServiceAccountName; sa != ProxyServiceAccount("gateway", "istio") || sa != *d.ServiceAccount.Name {
		t.Errorf("the pods run as %q, the ServiceAccount made is %q, ProxyServiceAccount says %q", sa, *d.ServiceAccount.Name, ProxyServiceAccount("gateway", "istio"))
	}
	if !strings.Contains(d.ConfigMap.Data[BootstrapKey], TokenDir+"/token") {
		t.Error("the bootstrap does not read the projected token")
	}

	cfg.Plaintext = true
	if _, err := DesiredDeployment(deployedSeed(), cfg); err == nil {
		t.Error("token over plaintext accepted")
	}
}

func TestDeploymentProgrammed(t *testing.T) {
	gw := deployedSeed()
	labels := map[string]string{ManagedLabel: managedValue(controller)}
	svc := func(typ corev1.ServiceType, ingress ...corev1.LoadBalancerIngress) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: typ}}
		s.Name, s.Namespace, s.Labels = "gateway-istio", "gateway-namespace", labels
		s.Status.LoadBalancer.Ingress = ingress
		return s
	}
	foreign := svc(corev1.ServiceTypeClusterIP)
	foreign.Labels = nil
	withAddresses := deployedSeed()
	withAddresses.Spec.Addresses = []gwv1.GatewaySpecAddress{{Value: "10.0.0.1"}}
	withHostname := deployedSeed()
	withHostname.Spec.Addresses = []gwv1.GatewaySpecAddress{{Type: ptr.To(gwv1.HostnameAddressType), Value: "gw.example.com"}}
	const fqdn = "gateway-istio.gateway-namespace.svc.cluster.local"
	cases := []struct {
		name    string
		gw      *gwv1.Gateway
		svc     *corev1.Service
		want    string // Programmed status (reason)
		served  bool
		message string
		addrs   []string
	}{
		{"no Service", gw, nil, "False (AddressNotUsable)", false,
			`Failed to assign to any requested addresses: hostname "` + fqdn + `" not found`, nil},
		{"someone else's Service", gw, foreign, "False (AddressNotUsable)", false, "", nil},
		{"load balancer pending", gw, svc(corev1.ServiceTypeLoadBalancer), "False (AddressNotAssigned)", true,
			`Assigned to service(s) ` + fqdn + `:80, but failed to assign to all requested addresses: address pending for hostname "` + fqdn + `"`, nil},
		{"load balancer with an IP and a hostname", gw,
			svc(corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "203.0.113.7"}, corev1.LoadBalancerIngress{Hostname: "lb.example.com"}),
			"True (Programmed)", true, "Resource programmed, assigned to service(s) " + fqdn + ":80",
			[]string{"IPAddress=203.0.113.7", "Hostname=lb.example.com"}},
		{"ClusterIP", gw, svc(corev1.ServiceTypeClusterIP), "True (Programmed)", true, "", []string{"Hostname=" + fqdn}},
		{"spec.addresses on a ClusterIP Service", withAddresses, svc(corev1.ServiceTypeClusterIP), "False (AddressNotUsable)", true, "", nil},
		{"spec.addresses, load balancer pending", withAddresses, svc(corev1.ServiceTypeLoadBalancer), "False (AddressNotUsable)", true,
			`Assigned to service(s) ` + fqdn + `:80, but the load balancer has not given it the requested address(es) 10.0.0.1: ` +
				`a LoadBalancer Service can ask for one address (spec.loadBalancerIP, the first of spec.addresses), which must be free ` +
				`and in the load balancer's pool; remove the addresses it cannot get`, nil},
		{"spec.addresses, another address given", withAddresses, svc(corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "203.0.113.7"}),
			"False (AddressNotUsable)", true, "", []string{"IPAddress=203.0.113.7"}},
		{"spec.addresses given", withAddresses, svc(corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "10.0.0.1"}),
			"True (Programmed)", true, "", []string{"IPAddress=10.0.0.1"}},
		{"spec.addresses with a Hostname", withHostname, svc(corev1.ServiceTypeLoadBalancer), "False (Invalid)", false, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DeploymentProgrammed(tc.gw, tc.svc, testProxy())
			status := "False"
			if p.Programmed {
				status = "True"
			}
			if got := status + " (" + string(p.Reason) + ")"; got != tc.want || p.ListenersServed != tc.served {
				t.Errorf("Programmed %s served %v, want %s served %v (%s)", got, p.ListenersServed, tc.want, tc.served, p.Message)
			}
			if tc.message != "" && p.Message != tc.message {
				t.Errorf("message %q, want %q", p.Message, tc.message)
			}
			var addrs []string
			for _, a := range p.Addresses {
				addrs = append(addrs, string(*a.Type)+"="+a.Value)
			}
			if diff := cmp.Diff(tc.addrs, addrs); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithProgrammed(t *testing.T) {
	view := NewGatewayView(multiGateway(), CertificateLookups{})
	pending := GatewayStatus(view, nil, false, now)
	addr := []gwv1.GatewayStatusAddress{{Value: "203.0.113.7"}}
	st := WithProgrammed(pending, view, ProgrammedStatus{Programmed: true, Reason: gwv1.GatewayReasonProgrammed,
		Message: "m", ListenersServed: true, Addresses: addr})
	if diff := cmp.Diff([]string{"Accepted=True (ListenersNotValid)", "Programmed=True (Programmed)"}, condStrings(st.Conditions)); diff != "" {
		t.Errorf("Gateway conditions (-want +got):\n%s", diff)
	}
	var programmed []string
	for _, l := range st.Listeners {
		programmed = append(programmed, condStrings(l.Conditions)[3])
	}
	// The invalid listener "bad" stays Invalid.
	want := []string{"Programmed=True (Programmed)", "Programmed=True (Programmed)", "Programmed=True (Programmed)",
		"Programmed=True (Programmed)", "Programmed=False (Invalid)"}
	if diff := cmp.Diff(want, programmed); diff != "" {
		t.Errorf("listener Programmed (-want +got):\n%s", diff)
	}
	if !cmp.Equal(st.Addresses, addr) || pending.Addresses != nil || condStrings(pending.Conditions)[1] != "Programmed=False (Pending)" {
		t.Errorf("addresses %v; input modified: %v %v", st.Addresses, pending.Addresses, pending.Conditions)
	}

	// Not served: listeners stay Pending; the Gateway takes the reason.
	st = WithProgrammed(pending, view, ProgrammedStatus{Reason: gwv1.GatewayReasonAddressNotUsable, Message: "m"})
	if got := condStrings(st.Listeners[0].Conditions)[3]; got != "Programmed=False (Pending)" {
		t.Errorf("listener of an unserved Gateway: %s", got)
	}
	if got := condStrings(st.Conditions)[1]; got != "Programmed=False (AddressNotUsable)" {
		t.Errorf("Gateway: %s", got)
	}
}

// Only Gateways of our classes that are in scope get a deployment; the
// status follows the Service.
func TestBuildDeploymentsAndStatus(t *testing.T) {
	stop := krt.WithStop(t.Context().Done())
	classes := krt.NewStaticCollection[*gwv1.GatewayClass](nil, nil, stop)
	gateways := krt.NewStaticCollection[*gwv1.Gateway](nil, nil, stop)
	services := krt.NewStaticCollection[*corev1.Service](nil, nil, stop)
	classes.UpdateObject(&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "istio"}, Spec: gwv1.GatewayClassSpec{ControllerName: controller}})
	classes.UpdateObject(&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/other"}})
	ours := deployedSeed()
	theirs := deployedSeed()
	theirs.Name, theirs.Spec.GatewayClassName = "theirs", "other"
	addressed := deployedSeed()
	addressed.Name, addressed.Spec.Addresses = "addressed", []gwv1.GatewaySpecAddress{{Type: ptr.To(gwv1.AddressType("example.com/fake")), Value: "x"}}
	for _, g := range []*gwv1.Gateway{ours, theirs, addressed} {
		gateways.UpdateObject(g)
	}
	out := Build(Inputs{
		GatewayClasses: classes, Gateways: gateways, HTTPRoutes: krt.NewStaticCollection[*gwv1.HTTPRoute](nil, nil, stop),
		ReferenceGrants: krt.NewStaticCollection[*gwv1.ReferenceGrant](nil, nil, stop),
		Namespaces:      krt.NewStaticCollection[*corev1.Namespace](nil, nil, stop), Services: services,
	}, Options{ControllerName: controller, ClusterDomain: "cluster.local", Krt: []krt.CollectionOption{stop}})
	dep := BuildDeployments(gateways, out.Gateways, testProxy(), []krt.CollectionOption{stop})
	statuses := DeployedGatewayStatuses(out.GatewayStatuses, gateways, out.Gateways, services, testProxy(), []krt.CollectionOption{stop})
	for _, s := range []krt.Syncer{dep.Deployments, dep.Workloads, statuses} {
		if !s.WaitUntilSynced(t.Context().Done()) {
			t.Fatal("not synced")
		}
	}
	keys := func() []string {
		var k []string
		for _, d := range dep.Workloads.List() {
			k = append(k, d.ResourceName())
		}
		return k
	}
	pollEq := func(what string, want string, got func() string) {
		t.Helper()
		poll.UntilOr(t, 10*time.Second, what, func() bool { return got() == want }, got)
	}
	pollEq("one Deployment", "gateway-namespace/gateway-istio", func() string { return strings.Join(keys(), ",") })
	programmed := func() string {
		s := statuses.GetKey("gateway-namespace/gateway")
		if s == nil {
			return ""
		}
		return strings.Join(condStrings(s.Status.Conditions), ", ")
	}
	pollEq("no Service yet", "Accepted=True (Accepted), Programmed=False (AddressNotUsable)", programmed)
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	svc.Name, svc.Namespace, svc.Labels = "gateway-istio", "gateway-namespace", map[string]string{ManagedLabel: "x"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
	services.UpdateObject(svc)
	pollEq("the Service's address", "Accepted=True (Accepted), Programmed=True (Programmed)", programmed)
	if a := statuses.GetKey("gateway-namespace/gateway").Status.Addresses; len(a) != 1 || a[0].Value != "203.0.113.7" {
		t.Errorf("addresses = %v", a)
	}
	if s := statuses.GetKey("gateway-namespace/addressed"); s == nil ||
		strings.Join(condStrings(s.Status.Conditions), ", ") != "Accepted=False (UnsupportedAddress), Programmed=False (Invalid)" {
		t.Errorf("Gateway with an unsupported address type: %+v", s)
	}
}

// spec.infrastructure's labels and annotations are on everything deployed
// for the Gateway, the pod template included (the Gateway API's
// GatewayInfrastructure lists the ServiceAccount, Pods and Service by the
// gateway-name label); our own keys are never overridden.
func TestDesiredDeploymentInfrastructureMetadata(t *testing.T) {
	gw := deployedSeed()
	gw.Spec.Infrastructure = &gwv1.GatewayInfrastructure{
		Labels:      map[gwv1.LabelKey]gwv1.LabelValue{"key2": "value2", GatewayNameLabel: "not-ours"},
		Annotations: map[gwv1.AnnotationKey]gwv1.AnnotationValue{"key1": "value1", BootstrapHashAnnotation: "not-ours"},
	}
	d, err := DesiredDeployment(gw, testProxy())
	if err != nil {
		t.Fatal(err)
	}
	tmpl := d.Deployment.Spec.Template
	for what, m := range map[string][2]map[string]string{
		"ServiceAccount": {d.ServiceAccount.Labels, d.ServiceAccount.Annotations},
		"Service":        {d.Service.Labels, d.Service.Annotations},
		"ConfigMap":      {d.ConfigMap.Labels, d.ConfigMap.Annotations},
		"Deployment":     {d.Deployment.Labels, d.Deployment.Annotations},
		"pod template":   {tmpl.Labels, tmpl.Annotations},
	} {
		if m[0]["key2"] != "value2" || m[1]["key1"] != "value1" {
			t.Errorf("%s: labels %v annotations %v, want key2=value2 and key1=value1", what, m[0], m[1])
		}
		if m[0][GatewayNameLabel] != gw.Name {
			t.Errorf("%s: %s=%q, want the Gateway's name (ours wins)", what, GatewayNameLabel, m[0][GatewayNameLabel])
		}
	}
	if tmpl.Annotations[BootstrapHashAnnotation] == "not-ours" {
		t.Error("the bootstrap hash annotation was overridden")
	}
}
