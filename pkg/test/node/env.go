// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// envSources are the objects a container's environment may read.
type envSources struct {
	services   corev1listers.ServiceLister
	configMaps corev1listers.ConfigMapLister
	secrets    corev1listers.SecretLister
}

// containerEnv returns the container's environment as the kubelet's
// makeEnvironmentVariables builds it (k8s.io/kubernetes
// pkg/kubelet/kubelet_pods.go): envFrom first, then env in order (a value's
// $(VAR) references see the variables set so far and the Service
// variables; valueFrom reads the downward API, ConfigMaps and Secrets), then
// the Service variables not already set. A pod without enableServiceLinks
// (the apiserver defaults it to true) is refused, as the kubelet refuses it.
func (s envSources) containerEnv(pod *corev1.Pod, c *corev1.Container, rt runtimeFields) (map[string]string, error) {
	if pod.Spec.EnableServiceLinks == nil {
		return nil, errors.New("nil pod.spec.enableServiceLinks encountered, cannot construct envvars")
	}
	svc, err := serviceEnv(s.services, pod.Namespace, *pod.Spec.EnableServiceLinks)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if err := s.addEnvFrom(env, pod.Namespace, from); err != nil {
			return nil, err
		}
	}
	lookup := lookupIn(env, svc)
	for _, v := range c.Env {
		val := v.Value
		switch {
		case val != "":
			val = expand(val, lookup)
		case v.ValueFrom != nil:
			val, err = s.valueFrom(pod, c, v.ValueFrom, rt)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", v.Name, err)
			}
		}
		env[v.Name] = val
	}
	for k, v := range svc {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	return env, nil
}

// valueFrom resolves one env var's valueFrom.
func (s envSources) valueFrom(pod *corev1.Pod, c *corev1.Container, from *corev1.EnvVarSource, rt runtimeFields) (string, error) {
	switch {
	case from.FieldRef != nil:
		return fieldRefValue(from.FieldRef, pod, rt)
	case from.ResourceFieldRef != nil:
		return resourceFieldRefValue(from.ResourceFieldRef, pod, c)
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := s.configMaps.ConfigMaps(pod.Namespace).Get(ref.Name)
		if err != nil {
			return optionalMissing(ref.Optional, fmt.Errorf("configmap %q: %w", ref.Name, err))
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			return optionalMissing(ref.Optional, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name))
		}
		return v, nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		sec, err := s.secrets.Secrets(pod.Namespace).Get(ref.Name)
		if err != nil {
			return optionalMissing(ref.Optional, fmt.Errorf("secret %q: %w", ref.Name, err))
		}
		v, ok := sec.Data[ref.Key]
		if !ok {
			return optionalMissing(ref.Optional, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name))
		}
		return string(v), nil
	default:
		return "", errors.New("unsupported valueFrom (this node resolves fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef)")
	}
}

// optionalMissing returns "" for an optional reference and err otherwise.
func optionalMissing(optional *bool, err error) (string, error) {
	if optional != nil && *optional {
		return "", nil
	}
	return "", err
}

// addEnvFrom adds every key of a ConfigMap or Secret, with the prefix; keys
// that are not valid variable names are skipped, as the kubelet skips them.
func (s envSources) addEnvFrom(env map[string]string, ns string, from corev1.EnvFromSource) error {
	data := map[string]string{}
	switch {
	case from.ConfigMapRef != nil:
		cm, err := s.configMaps.ConfigMaps(ns).Get(from.ConfigMapRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
				return nil
			}
			return fmt.Errorf("envFrom configmap %q: %w", from.ConfigMapRef.Name, err)
		}
		data = cm.Data
	case from.SecretRef != nil:
		sec, err := s.secrets.Secrets(ns).Get(from.SecretRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
				return nil
			}
			return fmt.Errorf("envFrom secret %q: %w", from.SecretRef.Name, err)
		}
		for k, v := range sec.Data {
			data[k] = string(v)
		}
	default:
		return errors.New("envFrom: unsupported source")
	}
	for k, v := range data {
		name := from.Prefix + k
		if len(validation.IsEnvVarName(name)) == 0 {
			env[name] = v
		}
	}
	return nil
}
