// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// serviceEnv returns the Service environment variables of a pod in
// namespace, as the kubelet's getServiceEnvVarMap and envvars.FromServices
// build them (k8s.io/kubernetes pkg/kubelet/kubelet_pods.go,
// pkg/kubelet/envvars/envvars.go): the "kubernetes" Service of the default
// namespace always, and with enableServiceLinks every other Service of the
// pod's namespace; Services without a ClusterIP (headless or "None") are
// skipped.
func serviceEnv(lister corev1listers.ServiceLister, namespace string, enableServiceLinks bool) (map[string]string, error) {
	services, err := lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	chosen := map[string]*corev1.Service{}
	for _, s := range services {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone {
			continue
		}
		switch {
		case s.Namespace == "default" && s.Name == "kubernetes":
			if _, ok := chosen[s.Name]; !ok {
				chosen[s.Name] = s
			}
		case s.Namespace == namespace && enableServiceLinks:
			chosen[s.Name] = s
		}
	}
	out := map[string]string{}
	for _, s := range chosen {
		addServiceVars(out, s)
	}
	return out, nil
}

// addServiceVars adds one Service's variables: NAME_SERVICE_HOST,
// NAME_SERVICE_PORT (first port), NAME_SERVICE_PORT_PORTNAME for named
// ports, and the Docker link variables NAME_PORT, NAME_PORT_<port>_<PROTO>
// and its _PROTO, _PORT and _ADDR.
func addServiceVars(out map[string]string, s *corev1.Service) {
	if len(s.Spec.Ports) == 0 {
		return
	}
	prefix := envName(s.Name)
	out[prefix+"_SERVICE_HOST"] = s.Spec.ClusterIP
	out[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
	for i, p := range s.Spec.Ports {
		if p.Name != "" {
			out[prefix+"_SERVICE_PORT_"+envName(p.Name)] = strconv.Itoa(int(p.Port))
		}
		proto := string(corev1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		url := fmt.Sprintf("%s://%s", strings.ToLower(proto), net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(p.Port))))
		if i == 0 {
			out[prefix+"_PORT"] = url
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out[pp] = url
		out[pp+"_PROTO"] = strings.ToLower(proto)
		out[pp+"_PORT"] = strconv.Itoa(int(p.Port))
		out[pp+"_ADDR"] = s.Spec.ClusterIP
	}
}

// envName is the kubelet's makeEnvVariableName: upper case, '-' to '_'.
func envName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}
