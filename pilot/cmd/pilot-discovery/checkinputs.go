// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
)

// The findings of this file are what breaks traffic but has no place in
// the statuses the controller writes, so check (and status, on stderr)
// says it from the inputs themselves:
//
//   - parent: a route's parentRef, or a ListenerSet's spec.parentRef, to a
//     Gateway or ListenerSet that is not in the inputs. The Gateway API
//     leaves a parentRef nothing resolves out of the route's status (no
//     controller owns it), so in a cluster the route is silently never
//     served; the typo is the most common mistake. A parentRef to a
//     Gateway of another class is a note: a folder may hold the Gateways of
//     several implementations, and the other controller judges its own.
//   - pods: an InferencePool whose selector matches no Pod and no pod
//     template of a workload (Deployment, StatefulSet, DaemonSet,
//     ReplicaSet, Job, CronJob) in its namespace: no endpoint, in a cluster
//     or in file mode. When only templates match and the inputs hold Pods
//     (a file-mode folder, where the folder's Pods are the pods), it is a
//     note: discovery -f serves it no endpoints.
//   - expired: an HTTPS listener whose certificate (the leaf of its
//     Secret's tls.crt) is outside its validity period at the time of the
//     run; clients refuse it. The controller does not say it in status:
//     its transformations are pure (no clock), and a condition that
//     changes with time alone would need a timer to rewrite every Gateway
//     status as certificates age; the clock stays at this edge.

// inputs are what inputFindings reads: the file source, the folder it
// read, the controller's outputs over it, and the time of the run.
type inputs struct {
	src       *file.Source
	out       gateway.Outputs
	dir       string
	now       time.Time
	inference bool
}

// inputFindings are the findings above, in kind and key order.
func inputFindings(in inputs) []finding {
	var fs []finding
	fs = append(fs, parentFindings(in)...)
	fs = append(fs, certificateFindings(in)...)
	if in.inference {
		fs = append(fs, podFindings(in)...)
	}
	return fs
}

// parentFindings checks every route parentRef and ListenerSet parentRef
// of group gateway.networking.k8s.io.
func parentFindings(in inputs) []finding {
	var fs []finding
	sets := in.src.ListenerSets()
	for _, ls := range sets.List() {
		obj := parentName("ListenerSet", ls.Namespace, ls.Name)
		key, ok := gateway.ListenerSetParent(ls)
		if !ok {
			ref := ls.Spec.ParentRef
			fs = append(fs, note(obj, fmt.Sprintf("spec.parentRef: %s/%s %s is not a Gateway: not checked",
				ptr.Deref(ref.Group, gateway.GatewayGroup), ptr.Deref(ref.Kind, gateway.GatewayKind), ref.Name)))
			continue
		}
		fs = append(fs, gatewayRefFindings(in, obj, "spec.parentRef", key)...)
	}
	routes := func(kind string, refs func() []routeRefs) {
		for _, r := range refs() {
			obj := parentName(kind, r.namespace, r.name)
			for i, ref := range r.refs {
				field := fmt.Sprintf("spec.parentRefs[%d]", i)
				group := string(ptr.Deref(ref.Group, gateway.GatewayGroup))
				rkind := string(ptr.Deref(ref.Kind, gateway.GatewayKind))
				key := types.NamespacedName{Namespace: string(ptr.Deref(ref.Namespace, gwv1.Namespace(r.namespace))), Name: string(ref.Name)}
				switch {
				case group == gateway.GatewayGroup && rkind == gateway.GatewayKind:
					fs = append(fs, gatewayRefFindings(in, obj, field, key)...)
				case group == gateway.GatewayGroup && rkind == gateway.ListenerSetKind:
					if sets.GetKey(key.String()) == nil {
						fs = append(fs, finding{what: "parent", object: obj, text: fmt.Sprintf(
							"%s: ListenerSet %s does not exist in the inputs: the route is attached nowhere through it%s",
							field, key, namesIn("ListenerSet", key.Namespace, listenerSetNames(in, key.Namespace)))})
					}
					// An existing ListenerSet's own parentRef is checked on it.
				default:
					fs = append(fs, note(obj, fmt.Sprintf("%s: %s/%s %s is not a parent infermesh implements: not checked", field, group, rkind, key)))
				}
			}
		}
	}
	routes("HTTPRoute", func() []routeRefs {
		var out []routeRefs
		for _, r := range in.src.HTTPRoutes().List() {
			out = append(out, routeRefs{r.Namespace, r.Name, r.Spec.ParentRefs})
		}
		return out
	})
	routes("GRPCRoute", func() []routeRefs {
		var out []routeRefs
		for _, r := range in.src.GRPCRoutes().List() {
			out = append(out, routeRefs{r.Namespace, r.Name, r.Spec.ParentRefs})
		}
		return out
	})
	routes("TLSRoute", func() []routeRefs {
		var out []routeRefs
		for _, r := range in.src.TLSRoutes().List() {
			out = append(out, routeRefs{r.Namespace, r.Name, r.Spec.ParentRefs})
		}
		return out
	})
	routes("TCPRoute", func() []routeRefs {
		var out []routeRefs
		for _, r := range in.src.TCPRoutes().List() {
			out = append(out, routeRefs{r.Namespace, r.Name, r.Spec.ParentRefs})
		}
		return out
	})
	return fs
}

type routeRefs struct {
	namespace, name string
	refs            []gwv1.ParentReference
}

// gatewayRefFindings checks one reference, at field of obj, to the Gateway
// key: a problem when the Gateway is not in the inputs, a note when it is
// not of one of our classes.
func gatewayRefFindings(in inputs, obj, field string, key types.NamespacedName) []finding {
	gw := in.src.Gateways().GetKey(key.String())
	if gw == nil {
		return []finding{{what: "parent", object: obj, text: fmt.Sprintf(
			"%s: Gateway %s does not exist in the inputs: nothing is attached through it%s",
			field, key, namesIn("Gateway", key.Namespace, gatewayNames(in, key.Namespace)))}}
	}
	if in.out.Gateways == nil || in.out.Gateways.GetKey(key.String()) != nil {
		return nil
	}
	class := string((*gw).Spec.GatewayClassName)
	why := "which is not in the inputs"
	if c := in.src.GatewayClasses().GetKey(class); c != nil {
		why = "whose controller is " + string((*c).Spec.ControllerName)
	}
	return []finding{note(obj, fmt.Sprintf("%s: Gateway %s is of GatewayClass %s, %s, not ours: not checked", field, key, class, why))}
}

func note(obj, text string) finding {
	return finding{what: "note", object: obj, text: text, note: true}
}

// namesIn lists names (of kind, in namespace ns) for a message, at most
// eight.
func namesIn(kind, ns string, names []string) string {
	if len(names) == 0 {
		return fmt.Sprintf(" (no %s in namespace %s)", kind, ns)
	}
	more := ""
	if len(names) > 8 {
		more, names = fmt.Sprintf(" and %d more", len(names)-8), names[:8]
	}
	return fmt.Sprintf(" (%ss in namespace %s: %s%s)", kind, ns, strings.Join(names, ", "), more)
}

func gatewayNames(in inputs, ns string) []string {
	var out []string
	for _, g := range in.src.Gateways().List() {
		if g.Namespace == ns {
			out = append(out, g.Name)
		}
	}
	return out
}

func listenerSetNames(in inputs, ns string) []string {
	var out []string
	for _, ls := range in.src.ListenerSets().List() {
		if ls.Namespace == ns {
			out = append(out, ls.Name)
		}
	}
	return out
}

// certificateFindings checks the certificate of every HTTPS listener that
// is served (its certificateRef resolved), of our Gateways and their
// accepted ListenerSets.
func certificateFindings(in inputs) []finding {
	if in.out.Gateways == nil {
		return nil
	}
	var fs []finding
	check := func(obj, field string, secret types.NamespacedName) {
		s := in.src.Secrets().GetKey(secret.String())
		if s == nil {
			return
		}
		cert := leafCertificate((*s).Data[corev1.TLSCertKey])
		if cert == nil {
			return // the listener's ResolvedRefs says why
		}
		switch {
		case in.now.After(cert.NotAfter):
			fs = append(fs, finding{what: "expired", object: obj, text: fmt.Sprintf(
				"%s: the certificate of Secret %s (%s) expired at %s: clients refuse it", field, secret,
				certSubject(cert), cert.NotAfter.UTC().Format(time.RFC3339))})
		case in.now.Before(cert.NotBefore):
			fs = append(fs, finding{what: "expired", object: obj, text: fmt.Sprintf(
				"%s: the certificate of Secret %s (%s) is not valid before %s: clients refuse it", field, secret,
				certSubject(cert), cert.NotBefore.UTC().Format(time.RFC3339))})
		}
	}
	for _, v := range in.out.Gateways.List() {
		gw := in.src.Gateways().GetKey(v.Gateway.String())
		for _, l := range v.Listeners {
			if l.Served() && l.Certificate.Name != "" {
				check(parentName("Gateway", v.Gateway.Namespace, v.Gateway.Name)+" listener "+string(l.Name),
					listenerField(gw, l.Name), l.Certificate)
			}
		}
		for _, ls := range v.ListenerSets {
			if !ls.Accepted() {
				continue
			}
			set := in.src.ListenerSets().GetKey(ls.ListenerSet.String())
			for _, l := range ls.Listeners {
				if l.Served() && l.Certificate.Name != "" {
					check(parentName("ListenerSet", ls.ListenerSet.Namespace, ls.ListenerSet.Name)+" listener "+string(l.Name),
						listenerSetField(set, l.Name), l.Certificate)
				}
			}
		}
	}
	return fs
}

// listenerField is the path of listener name's certificateRef in gw.
func listenerField(gw **gwv1.Gateway, name gwv1.SectionName) string {
	if gw != nil {
		for i, l := range (*gw).Spec.Listeners {
			if l.Name == name {
				return fmt.Sprintf("spec.listeners[%d].tls.certificateRefs[0]", i)
			}
		}
	}
	return "tls.certificateRefs[0]"
}

func listenerSetField(ls **gwv1.ListenerSet, name gwv1.SectionName) string {
	if ls != nil {
		for i, l := range (*ls).Spec.Listeners {
			if l.Name == name {
				return fmt.Sprintf("spec.listeners[%d].tls.certificateRefs[0]", i)
			}
		}
	}
	return "tls.certificateRefs[0]"
}

// leafCertificate parses the first CERTIFICATE block of a PEM chain; nil
// when there is none or it does not parse.
func leafCertificate(chain []byte) *x509.Certificate {
	for len(chain) > 0 {
		var b *pem.Block
		if b, chain = pem.Decode(chain); b == nil {
			return nil
		}
		if b.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil
			}
			return c
		}
	}
	return nil
}

func certSubject(c *x509.Certificate) string {
	if len(c.DNSNames) > 0 {
		return "for " + strings.Join(c.DNSNames, ", ")
	}
	return "subject " + c.Subject.String()
}

// podFindings checks that each InferencePool selects a pod.
func podFindings(in inputs) []finding {
	pods := in.src.Pods().List()
	podLabels := map[string][]labels.Set{} // by namespace
	for _, pod := range pods {
		podLabels[pod.Namespace] = append(podLabels[pod.Namespace], pod.Labels)
	}
	var templates []podTemplate
	templatesRead := false
	var fs []finding
	for _, p := range in.src.InferencePools().List() {
		sel := labels.Set{}
		for k, v := range p.Spec.Selector.MatchLabels {
			sel[string(k)] = string(v)
		}
		if len(sel) == 0 {
			continue // refused by the CRD's validation, reported as rejected
		}
		selector := labels.SelectorFromSet(sel)
		if slices.ContainsFunc(podLabels[p.Namespace], func(l labels.Set) bool { return selector.Matches(l) }) {
			continue
		}
		if !templatesRead {
			templates, templatesRead = readPodTemplates(in.dir), true
		}
		var matched []string
		for _, t := range templates {
			if t.namespace == p.Namespace && selector.Matches(labels.Set(t.labels)) {
				matched = append(matched, t.kind+" "+t.name)
			}
		}
		obj := parentName("InferencePool", p.Namespace, p.Name)
		switch {
		case len(matched) == 0:
			fs = append(fs, finding{what: "pods", object: obj, text: fmt.Sprintf(
				"spec.selector: matches no Pod and no pod template (of a Deployment, StatefulSet, DaemonSet, ReplicaSet, Job "+
					"or CronJob) in namespace %s: selector %s; the pool has no endpoint", p.Namespace, selector)})
		case len(pods) > 0:
			fs = append(fs, note(obj, fmt.Sprintf("spec.selector: matches no Pod of the inputs, only the pod template of %s: "+
				"in a cluster their pods are selected; discovery -f, whose pods are the folder's Pods, serves the pool no endpoint",
				strings.Join(matched, ", "))))
		}
	}
	return fs
}

// sortFindings orders findings by kind (kindRank), then object, keeping
// the order of equal ones.
func sortFindings(fs []finding) {
	slices.SortStableFunc(fs, func(a, b finding) int {
		return cmp.Or(cmp.Compare(kindRank(a.object), kindRank(b.object)), strings.Compare(a.object, b.object))
	})
}
