// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package seed holds the objects of the seed scenario (the first seed
// document's File 2) for tests, so that every test of "the seed's pool" uses
// the same object.
package seed

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
)

// Names of the seed scenario.
const (
	Namespace = "llm-namespace"
	PoolName  = "vllm-llama3-8b"
	EPPName   = "vllm-llama3-8b-epp"
	EPPPort   = 9002
)

// InferencePool returns a new copy of the seed's InferencePool: selector
// app=vllm-llama3-8b, target port 8000, endpoint picker vllm-llama3-8b-epp on
// port 9002 with failureMode FailOpen.
func InferencePool() *inferencev1.InferencePool {
	return &inferencev1.InferencePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: PoolName},
		Spec: inferencev1.InferencePoolSpec{
			Selector:    inferencev1.LabelSelector{MatchLabels: map[inferencev1.LabelKey]inferencev1.LabelValue{"app": PoolName}},
			TargetPorts: []inferencev1.Port{{Number: 8000}},
			EndpointPickerRef: &inferencev1.EndpointPickerRef{
				Name:        EPPName,
				Port:        &inferencev1.Port{Number: EPPPort},
				FailureMode: inferencev1.EndpointPickerFailOpen,
			},
		},
	}
}
