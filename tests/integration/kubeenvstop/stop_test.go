// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package kubeenvstop tests kubeenv's Env.Stop against a real cluster.
package kubeenvstop

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
)

func TestStopEndsTheClusterAndIsIdempotent(t *testing.T) {
	env := kubeenv.Start(t)
	if env.APIServerReadyAfter <= 0 {
		t.Errorf("APIServerReadyAfter = %v, want > 0", env.APIServerReadyAfter)
	}
	cfg := env.RESTConfig()
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Stop()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Errorf("kube-apiserver still accepts connections at %s after Stop", u.Host)
	}
	if _, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("List succeeded after Stop")
	}
	began := time.Now()
	env.Stop() // a no-op
	if d := time.Since(began); d > time.Second {
		t.Errorf("second Stop took %v", d)
	}
}
