// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package sharedstatus_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"

	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/poll"
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
		startWriter(t, env, c.agent, c.controller, desired)
	}
	// Both entries present: each writer has written once.
	poll.Until(t, 30*time.Second, "both writers' entries in the pool's status", func() bool {
		p, err := inf.InferenceV1().InferencePools(ns).Get(ctx, poolName, metav1.GetOptions{})
		return err == nil && len(p.Status.Parents) == 2
	})
	// Absence of a loop needs a window: with the bug, 3 s held about 100
	// writes per writer.
	time.Sleep(3 * time.Second)
	a, b := statusWrites(t, env, "writer-a")[200], statusWrites(t, env, "writer-b")[200]
	t.Logf("successful status writes: a=%d b=%d", a, b)
	if a != 1 || b != 1 {
		t.Errorf("write loop: %d writes by a and %d by b, want one each", a, b)
	}
}
