// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file_test

import (
	"testing"
)

const richPod = `apiVersion: v1
kind: Pod
metadata:
  name: vllm-0
  namespace: llm-namespace
  labels:
    app: vllm
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"big":"json"}'
  managedFields:
  - manager: kubectl
    operation: Apply
    apiVersion: v1
spec:
  nodeName: node-1
  containers:
  - name: vllm
    image: example.invalid/vllm
    env:
    - name: MODEL
      value: llama
    ports:
    - name: http
      containerPort: 8000
status:
  phase: Running
  podIP: 10.0.0.1
  conditions:
  - type: Ready
    status: "True"
    message: all good
`

// Pods are stored with only what the EndpointSlice computation reads, every
// object without managedFields; an edit of a field left out is still a change
// of the folder (Revision), with no event for the unchanged stored Pod.
func TestStoredObjectsAreReduced(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "pod.yaml", richPod)
	write(t, dir, "pool.yaml", goodPool("pool"))
	write(t, dir, "gw.yaml", `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gw
  namespace: llm-namespace
  managedFields:
  - manager: kubectl
    operation: Apply
    apiVersion: gateway.networking.k8s.io/v1
spec:
  gatewayClassName: infermesh
  listeners:
  - name: http
    port: 80
    protocol: HTTP
`)
	s := newSource(t, dir)
	if ps := s.Problems(); len(ps) > 0 {
		t.Fatalf("problems: %s", problemText(ps))
	}
	p := s.Pods().GetKey("llm-namespace/vllm-0")
	if p == nil {
		t.Fatal("pod not stored")
	}
	pod := *p
	if pod.Annotations != nil || pod.ManagedFields != nil || pod.Spec.Containers[0].Image != "" ||
		pod.Spec.Containers[0].Env != nil || pod.Status.Conditions[0].Message != "" {
		t.Errorf("stored Pod keeps fields nothing reads: %+v", pod)
	}
	if pod.Labels["app"] != "vllm" || pod.Spec.NodeName != "node-1" || pod.Status.PodIP != "10.0.0.1" ||
		pod.Spec.Containers[0].Ports[0].ContainerPort != 8000 || pod.Status.Conditions[0].Status != "True" ||
		pod.UID == "" || pod.Generation != 1 {
		t.Errorf("stored Pod lost fields the pipeline reads or the server sets: %+v", pod)
	}
	if gw := s.Gateways().GetKey("llm-namespace/gw"); gw == nil || (*gw).ManagedFields != nil {
		t.Errorf("stored Gateway: %+v, want it without managedFields", gw)
	}

	run(t, s)
	rev := s.Revision()
	write(t, dir, "pod.yaml", richPod+"    reason: edited\n")
	waitFor(t, s, "the edit counted as a change", func() bool { return s.Revision() > rev })
	if now := s.Pods().GetKey("llm-namespace/vllm-0"); now == nil || *now != pod {
		t.Errorf("an edit of a field left out replaced the stored Pod")
	}
}
