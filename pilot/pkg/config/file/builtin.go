// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/endpointslice"
)

// builtinKind is a built-in kind that has a collection.
type builtinKind struct {
	coll       string
	namespaced bool
	nameFn     apivalidation.ValidateNameFunc
	// prepare applies the API server's defaults that the pipeline relies on
	// and returns the errors of the checks we reproduce.
	prepare func(obj runtime.Object) field.ErrorList
}

var builtinKinds = map[schema.GroupVersionKind]builtinKind{
	corev1.SchemeGroupVersion.WithKind("Namespace"):          {"Namespaces", false, apivalidation.ValidateNamespaceName, prepareNamespace},
	corev1.SchemeGroupVersion.WithKind("Pod"):                {"Pods", true, apivalidation.NameIsDNSSubdomain, preparePod},
	corev1.SchemeGroupVersion.WithKind("Service"):            {"Services", true, apivalidation.NameIsDNS1035Label, prepareService},
	corev1.SchemeGroupVersion.WithKind("Secret"):             {"Secrets", true, apivalidation.NameIsDNSSubdomain, prepareSecret},
	corev1.SchemeGroupVersion.WithKind("ConfigMap"):          {"ConfigMaps", true, apivalidation.NameIsDNSSubdomain, nil},
	discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"): {"EndpointSlices", true, apivalidation.NameIsDNSSubdomain, prepareEndpointSlice},
}

// strictDeserializer decodes the client-go scheme's kinds, failing on unknown
// and duplicate fields as the API server does with --validate=strict.
var strictDeserializer = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

var strictField = regexp.MustCompile(`^(unknown|duplicate) field "(.*)"$`)

// decodeBuiltin decodes a kind of the client-go scheme strictly. Kinds
// without a collection stop there (accepted and ignored); the others get
// their namespace ("default" when unset), the defaults of prepare, and
// ObjectMeta validation.
func decodeBuiltin(ref docRef, gvk schema.GroupVersionKind, u map[string]any, raw []byte, res *decodeResult) {
	bk, stored := builtinKinds[gvk]
	id := objectID{group: gvk.Group, kind: gvk.Kind, name: ref.name}
	if bk.namespaced {
		id.namespace = ref.namespace
		if id.namespace == "" {
			id.namespace = metav1.NamespaceDefault
		}
		ref.namespace = id.namespace
	} else if stored {
		ref.namespace = ""
	}
	obj, err := strictDecode(u, raw)
	if err != nil {
		if strict, ok := runtime.AsStrictDecodingError(err); ok {
			for _, e := range strict.Errors() {
				if m := strictField.FindStringSubmatch(e.Error()); m != nil {
					res.problems = append(res.problems, ref.problem(m[2], m[1]+" field"))
				} else {
					res.problems = append(res.problems, ref.problem("", e.Error()))
				}
			}
			res.reject(id)
			return
		}
		res.reject(id, ref.problem("", err.Error()))
		return
	}
	if !stored {
		return
	}
	accessor, ok := obj.(metav1.Object)
	if !ok {
		res.reject(id, ref.problem("", fmt.Sprintf("internal error: %T has no metadata", obj)))
		return
	}
	accessor.SetNamespace(id.namespace)
	meta := &metav1.ObjectMeta{}
	if om, ok := obj.(interface{ GetObjectMeta() metav1.Object }); ok {
		if m, ok := om.GetObjectMeta().(*metav1.ObjectMeta); ok {
			meta = m
		}
	}
	errs := validateMeta(meta, bk.namespaced, bk.nameFn)
	if bk.prepare != nil {
		errs = append(errs, bk.prepare(obj)...)
	}
	if len(errs) > 0 {
		res.reject(id, ref.fieldProblems(errs)...)
		return
	}
	o := object{id: id, coll: bk.coll, key: namespacedKey(id.namespace, id.name), ref: ref}
	// Both digests here, on every core, rather than in load; from the whole
	// object, so a Pod's generation follows the manifest, not the reduced Pod.
	o.digest, o.specDigest = objectDigests(obj)
	o.value = storedValue(obj)
	res.objects = append(res.objects, o)
}

// strictDecode decodes u strictly into its client-go type. raw, when not
// nil, is u's JSON as toJSON wrote it: decoding it directly spares
// re-encoding u. toJSON's text is what encoding/json writes for the YAML's
// values, and the generic decoding and re-encoding of u changes nothing in
// it but the order of keys, so the typed result is the same. The decoding
// itself is the strict deserializer's minus its first pass over the text
// (which finds apiVersion and kind, known here already); on any error the
// deserializer decodes u's own encoding (genericJSON, which is
// json.Marshal's text) again, so errors (their order included) are as they
// always were. raw is nil for a document read the short way (shortWay).
func strictDecode(u map[string]any, raw []byte) (runtime.Object, error) {
	data := raw
	if data == nil {
		var err error
		if data, err = genericJSON(u); err != nil {
			return nil, fmt.Errorf("internal error: %w", err)
		}
	}
	if obj, ok := decodeStrictly(u, data); ok {
		return obj, nil
	}
	if raw != nil {
		var err error
		if data, err = genericJSON(u); err != nil {
			return nil, fmt.Errorf("internal error: %w", err)
		}
	}
	obj, _, err := strictDeserializer.Decode(data, nil, nil)
	return obj, err
}

// decodeStrictly is what strictDeserializer.Decode does to data, u's JSON,
// once it has read apiVersion and kind (json.Serializer.Decode: a new object
// of the kind, then sigs.k8s.io/json's strict unmarshalling); false on any
// error.
func decodeStrictly(u map[string]any, data []byte) (runtime.Object, bool) {
	apiVersion, _ := u["apiVersion"].(string)
	kind, _ := u["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Version == "" || kind == "" {
		return nil, false
	}
	obj, err := scheme.Scheme.New(gv.WithKind(kind))
	if err != nil {
		return nil, false
	}
	strictErrs, err := kjson.UnmarshalStrict(data, obj)
	return obj, err == nil && len(strictErrs) == 0
}

// storedValue is what a collection keeps of a decoded built-in object, as
// little as the pipeline reads (the digests are taken from the whole object
// first, so any edit of the manifest still counts as a change): a Pod is
// reduced, in place, to the fields the EndpointSlice computation reads
// (endpointslice.ReducePodFields), which in a folder of model servers is
// most of what file mode holds; any other object loses
// metadata.managedFields, as in the cluster-mode informers
// (kube.StripManagedFields).
func storedValue(obj runtime.Object) runtime.Object {
	if p, ok := obj.(*corev1.Pod); ok {
		endpointslice.ReducePodFields(p)
		return p
	}
	_, _ = kube.StripManagedFields(obj)
	return obj
}

// prepareNamespace: the kubernetes.io/metadata.name label, which the API
// server sets on every Namespace (and Gateway allowedRoutes selectors match),
// and status.phase Active.
func prepareNamespace(obj runtime.Object) field.ErrorList {
	ns := obj.(*corev1.Namespace)
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
	return nil
}

// preparePod: container port protocol TCP.
func preparePod(obj runtime.Object) field.ErrorList {
	pod := obj.(*corev1.Pod)
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for j := range cs[i].Ports {
				if cs[i].Ports[j].Protocol == "" {
					cs[i].Ports[j].Protocol = corev1.ProtocolTCP
				}
			}
		}
	}
	return nil
}

// prepareService applies SetDefaults_Service's defaults: type ClusterIP,
// sessionAffinity None (and no sessionAffinityConfig then), port protocol TCP,
// targetPort = port when unset, externalTrafficPolicy Cluster for NodePort
// and LoadBalancer, internalTrafficPolicy Cluster for the types with a
// cluster IP. It checks each port's number, protocol, targetPort (number or
// port name) and name (a DNS label), and that ports are named when there are
// several, with unique names.
func prepareService(obj runtime.Object) field.ErrorList {
	spec := &obj.(*corev1.Service).Spec
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityNone {
		spec.SessionAffinityConfig = nil
	}
	external := spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer
	if external && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil && (external || spec.Type == corev1.ServiceTypeClusterIP) {
		p := corev1.ServiceInternalTrafficPolicyCluster
		spec.InternalTrafficPolicy = &p
	}
	var errs field.ErrorList
	names := map[string]bool{}
	ports := field.NewPath("spec", "ports")
	for i := range spec.Ports {
		p := &spec.Ports[i]
		at := ports.Index(i)
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
		for _, msg := range utilvalidation.IsValidPortNum(int(p.Port)) {
			errs = append(errs, field.Invalid(at.Child("port"), p.Port, msg))
		}
		errs = append(errs, validateProtocol(at.Child("protocol"), p.Protocol)...)
		// targetPort: a port number, or an IANA_SVC_NAME naming a container
		// port (validatePortNumOrName in the API server).
		if p.TargetPort.Type == intstr.Int {
			for _, msg := range utilvalidation.IsValidPortNum(p.TargetPort.IntValue()) {
				errs = append(errs, field.Invalid(at.Child("targetPort"), p.TargetPort.IntValue(), msg))
			}
		} else {
			for _, msg := range utilvalidation.IsValidPortName(p.TargetPort.StrVal) {
				errs = append(errs, field.Invalid(at.Child("targetPort"), p.TargetPort.StrVal, msg))
			}
		}
		if p.Name != "" {
			for _, msg := range utilvalidation.IsDNS1123Label(p.Name) {
				errs = append(errs, field.Invalid(at.Child("name"), p.Name, msg))
			}
		}
		if len(spec.Ports) > 1 && p.Name == "" {
			errs = append(errs, field.Required(at.Child("name"), "when there are multiple ports"))
		} else if p.Name != "" && names[p.Name] {
			errs = append(errs, field.Duplicate(at.Child("name"), p.Name))
		}
		names[p.Name] = true
	}
	return errs
}

// prepareSecret: stringData merged into data (stringData wins), as the API
// server's conversion does, and type Opaque when unset.
func prepareSecret(obj runtime.Object) field.ErrorList {
	s := obj.(*corev1.Secret)
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	return nil
}

// prepareEndpointSlice: port name "" and protocol TCP when unset
// (SetDefaults_EndpointPort); checks addressType and each port's protocol
// and number.
func prepareEndpointSlice(obj runtime.Object) field.ErrorList {
	es := obj.(*discoveryv1.EndpointSlice)
	var errs field.ErrorList
	switch es.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
	case "":
		errs = append(errs, field.Required(field.NewPath("addressType"), ""))
	default:
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), es.AddressType,
			[]discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN}))
	}
	for i := range es.Ports {
		p := &es.Ports[i]
		at := field.NewPath("ports").Index(i)
		if p.Name == nil {
			p.Name = new(string)
		}
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
		errs = append(errs, validateProtocol(at.Child("protocol"), *p.Protocol)...)
		if p.Port != nil {
			for _, msg := range utilvalidation.IsInRange(int(*p.Port), 0, 65535) {
				errs = append(errs, field.Invalid(at.Child("port"), *p.Port, msg))
			}
		}
	}
	return errs
}

func validateProtocol(at *field.Path, p corev1.Protocol) field.ErrorList {
	switch p {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	}
	return field.ErrorList{field.NotSupported(at, p, []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP})}
}
