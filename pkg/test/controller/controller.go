// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/kube"
)

// UserAgent is the user agent of the controller's requests, so tests can
// find them in the API server's audit log.
const UserAgent = "pilot-discovery-under-test"

// Start runs the controller against the cluster cfg points to, with the
// feature flags in flags (unset ones at their defaults), recording events
// to the cluster. It returns the controller; everything stops when the test
// ends.
func Start(t testing.TB, cfg *rest.Config, flags map[string]string, opts ...kube.Option) *gateway.Controller {
	t.Helper()
	f, err := features.Load(func(k string) (string, bool) { v, ok := flags[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = UserAgent
	// As pilot-discovery builds its Client: the writers' own entries kept.
	opts = append([]kube.Option{kube.WithAppliedFieldsOf(gateway.FieldManagers(f)...)}, opts...)
	client, err := kube.NewFromRESTConfig(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.Kube().CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "pilot-discovery"})
	c, err := gateway.NewController(gateway.ControllerConfig{
		Client: client, Features: f, Recorder: recorder, IsLeader: func() bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	client.Start(stop)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range c.RunFunctions() {
		wg.Go(func() { run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		close(stop)
		client.Shutdown()
		broadcaster.Shutdown()
	})
	return c
}
