// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/infermesh/infermesh/pkg/test/poll"
)

// installTimeout bounds the wait for pilot-discovery's pods to be Ready.
const installTimeout = 180 * time.Second

// setUp is what both suites' runs share, in order: the cluster of spec
// with the node running images, the service proxy and load-balancer
// stand-in, infermesh from manifests/ rolled out, and the GatewayClass
// the suite is told to use (with bodyMode's parameters). Each step logs
// as it finishes, so a failure shows how far it got; everything stops at
// the test's end.
func setUp(t *testing.T, cfg config, spec clusterSpec, bodyMode string) *cluster {
	t.Helper()
	images, err := readImages(filepath.Join(cfg.images, "images.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := startCluster(t, spec, cfg.suite, images, cfg.state)
	t.Log("step: cluster, scheduler and node up")

	lb, err := startLoadBalancer(ctx, c.client, c.bridge, spec.lbCIDR, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.stop)

	if err := c.installInfermesh(ctx, cfg.repo); err != nil {
		t.Fatalf("install infermesh from manifests/: %v", err)
	}
	poll.UntilOr(t, installTimeout, "pilot-discovery Deployment rolled out (manifests/20-deployment.yaml, then PILOT_GATEWAY_XDS_CA_FILE)", func() bool {
		d, err := c.client.AppsV1().Deployments(installNamespace).Get(ctx, "pilot-discovery", metav1.GetOptions{})
		return err == nil && rolledOut(d)
	}, func() string { return c.podsReport(ctx, installNamespace) })
	t.Log("step: infermesh installed from manifests/, pilot-discovery rolled out")

	if err := c.createGatewayClass(ctx, bodyMode); err != nil {
		t.Fatalf("GatewayClass: %v", err)
	}
	t.Logf("step: GatewayClass %s created, EPP request body mode %s (the suite waits for Accepted)", gatewayClass, bodyMode)
	return c
}

// TestGIEConformance is `make conformance`: the cluster, infermesh from
// manifests/, the GatewayClass, the endpoint pickers' DestinationRules,
// then the suite's own binary; the summary line goes to
// CONFORMANCE_SUMMARY.
func TestGIEConformance(t *testing.T) {
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	c := setUp(t, cfg, gieCluster, cfg.bodyMode)
	if err := c.eppTLSRules(context.Background()); err != nil {
		t.Fatal(err)
	}

	runErr := runSuite(cfg, c.env.Kubeconfig, suiteArgs(cfg))
	st, err := readReport(cfg.report)
	if err != nil {
		t.Fatalf("%v (suite exit: %v)", err, runErr)
	}
	verdicts, err := suiteVerdicts(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := verdicts.Check(st); err != nil {
		// No summary line: hack/conformance.sh then says the suite did
		// not report, and the run fails.
		t.Fatal(err)
	}
	line := summary(verdicts, st)
	if err := os.WriteFile(cfg.summary, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(line)
	if runErr != nil {
		t.Errorf("the suite failed: %v", runErr)
	}
}

// suiteVerdicts reads Go's verdicts from the suite's output (suite.log).
func suiteVerdicts(cfg config) (Verdicts, error) {
	out, err := os.Open(filepath.Join(cfg.state, "suite.log"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	return ParseVerdicts(out)
}
