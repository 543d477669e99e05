// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kube_test

import (
	"testing"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/serviceregistry/kube"
)

// The registry recognises shadow Services by the labels the controller
// writes (an external test package, so the controller may one day import
// the registry without a cycle).
func TestShadowLabelsMatchController(t *testing.T) {
	if kube.ServiceSemanticsLabel != gateway.ServiceSemanticsLabel ||
		kube.ServiceSemanticsInferencePool != gateway.ServiceSemanticsInferencePool {
		t.Errorf("registry reads %s=%s, controller writes %s=%s", kube.ServiceSemanticsLabel,
			kube.ServiceSemanticsInferencePool, gateway.ServiceSemanticsLabel, gateway.ServiceSemanticsInferencePool)
	}
	if got := gateway.ShadowServiceName("vllm-llama3-8b"); got != "vllm-llama3-8b-ip-22dc7de1" {
		t.Errorf("seed shadow Service name = %q; the registry's tests assume vllm-llama3-8b-ip-22dc7de1", got)
	}
}
