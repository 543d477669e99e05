// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package sharedstatus_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/writer"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

// Regression: two StatusWriters with different controllerNames on one pool,
// each with one fixed desired entry and nothing else changing. When
// MergeParents put its own entries last, the two rewrote the list at each
// other about 34 times a second, forever. Now each writes once and stops.
func TestTwoStatusWritersDoNotPingPong(t *testing.T) {
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(env.RESTConfig())
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inf := inferenceclient.NewForConfigOrDie(env.RESTConfig())
	if _, err := inf.InferenceV1().InferencePools(ns).Create(ctx, seedPool(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	entry := func(controller, gw string) parent {
		p := parent{ParentRef: ref("", gw), ControllerName: inferencev1.ControllerName(controller)}
		p.Conditions = []metav1.Condition{cond(refKey(&p), "Accepted", metav1.ConditionTrue, "Accepted", "x", 1)}
		return p
	}
	for _, c := range []struct{ agent, controller, gw string }{{"writer-a", ourController, "gw-a"}, {"writer-b", otherController, "gw-b"}} {
		desired := krt.NewStaticCollection[poolStatus](nil, []poolStatus{{Namespace: ns, Name: poolName, Parents: []parent{entry(c.controller, c.gw)}}}, krt.WithStop(ctx.Done()))
		cfg := env.RESTConfig()
		cfg.UserAgent = c.agent
		client, err := kube.NewFromRESTConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		api := client.Inference().InferenceV1()
		w, err := writer.NewStatusWriter(writer.StatusConfig[*inferencev1.InferencePool, parent]{
			Name: c.agent, Desired: desired, Live: client.InferencePools(), Controller: c.controller, Access: poolParents,
			Get: func(ctx context.Context, ns, name string) (*inferencev1.InferencePool, error) {
				return api.InferencePools(ns).Get(ctx, name, metav1.GetOptions{})
			},
			Parents: func(p *inferencev1.InferencePool) []parent { return p.Status.Parents },
			WithParents: func(p *inferencev1.InferencePool, ps []parent) *inferencev1.InferencePool {
				p = p.DeepCopy()
				p.Status.Parents = ps
				return p
			},
			UpdateStatus: func(ctx context.Context, p *inferencev1.InferencePool) error {
				_, err := api.InferencePools(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
				return err
			},
			IsLeader: func() bool { return true },
		})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(context.Background())
		stop, done := make(chan struct{}), make(chan struct{})
		client.Start(stop)
		go func() { defer close(done); w.Run(wctx); close(stop); client.Shutdown() }()
		t.Cleanup(func() { cancel(); <-done })
	}
	// Both entries present: each writer has written once.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := inf.InferenceV1().InferencePools(ns).Get(ctx, poolName, metav1.GetOptions{})
		if err == nil && len(p.Status.Parents) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two writers did not both write their entry within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Absence of a loop needs a window: with the bug, 3 s held about 100
	// writes per writer.
	time.Sleep(3 * time.Second)
	a, b := statusWrites(t, env, "writer-a")[200], statusWrites(t, env, "writer-b")[200]
	t.Logf("successful status writes: a=%d b=%d", a, b)
	if a != 1 || b != 1 {
		t.Errorf("write loop: %d writes by a and %d by b, want one each", a, b)
	}
}
