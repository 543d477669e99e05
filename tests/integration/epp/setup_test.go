// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package epp_test runs the real endpoint pickers (pkg/test/epp: GIE v1.6.2
// lwepp and v1.0.0 epp) against a real cluster (pkg/test/kubeenv) and two
// simulated vLLM pods (pkg/test/vllmsim) whose addresses live in the test's
// own network namespace, and speaks raw ext_proc to them as Envoy would.
package epp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

const (
	namespace = "epp-test"
	poolName  = "vllm-pool"
	model     = "meta-llama/Llama-3.1-8B-Instruct"
	podPort   = 8000
)

// podIPs are the only non-loopback addresses this package sends traffic to:
// they live in its network namespace. Unique among the integ suites.
var podIPs = []string{"10.244.31.1", "10.244.31.2"}

// cluster is what every test of the package shares: one cluster, the pool and
// its two ready pods, served from the network namespace.
type cluster struct {
	env   *kubeenv.Env
	pods  []*pod
	addrs []string // podIP:podPort, in pod order
}

// pod is one simulated model server with a count of the /metrics scrapes it
// answered.
type pod struct {
	sim     *vllmsim.Server
	scrapes atomic.Int64
}

func (p *pod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/metrics" {
		p.scrapes.Add(1)
	}
	p.sim.ServeHTTP(w, r)
}

// startCluster starts the cluster with the InferencePool CRD (go.mod's GIE
// version) and the InferenceObjective CRD the full EPP also watches, the
// network namespace with one vllmsim per pod address, and the pool of the two
// pods, marked ready.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	poolCRD, err := kubeenv.InferencePoolCRD()
	if err != nil {
		t.Fatal(err)
	}
	objectiveCRD, err := kubeenv.InferenceObjectiveCRD()
	if err != nil {
		t.Fatal(err)
	}
	env := kubeenv.Start(t, kubeenv.WithCRDs(poolCRD, objectiveCRD))
	c := &cluster{env: env}

	ns := kubeenv.NewNetNS(t, fmt.Sprintf("epp-test-%d", time.Now().UnixNano()%1e6), podIPs...)
	for i, ip := range podIPs {
		p := &pod{sim: vllmsim.New(vllmsim.Config{PodName: fmt.Sprintf("vllm-%d", i), Model: model, Port: podPort})}
		addr := net.JoinHostPort(ip, strconv.Itoa(podPort))
		l, err := ns.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		t.Cleanup(func() { // before NewNetNS's cleanup deletes the namespace
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Error(err)
			}
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Error(err)
			}
			if err := p.sim.Close(); err != nil {
				t.Error(err)
			}
		})
		c.pods = append(c.pods, p)
		c.addrs = append(c.addrs, addr)
	}

	ctx := t.Context()
	cfg := env.RESTConfig()
	kube := kubernetes.NewForConfigOrDie(cfg)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pool := &inferencev1.InferencePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: poolName},
		Spec: inferencev1.InferencePoolSpec{
			Selector:    inferencev1.LabelSelector{MatchLabels: map[inferencev1.LabelKey]inferencev1.LabelValue{"app": poolName}},
			TargetPorts: []inferencev1.Port{{Number: podPort}},
			EndpointPickerRef: &inferencev1.EndpointPickerRef{
				Name: "epp", Port: &inferencev1.Port{Number: 9002}, FailureMode: inferencev1.EndpointPickerFailClose,
			},
		},
	}
	if _, err := inferenceclient.NewForConfigOrDie(cfg).InferenceV1().InferencePools(namespace).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kubeenv.CreateReadyPods(ctx, kube, namespace, "vllm", map[string]string{"app": poolName}, podPort, podIPs...); err != nil {
		t.Fatal(err)
	}
	return c
}
