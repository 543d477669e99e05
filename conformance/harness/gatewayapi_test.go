// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gatewayAPIProfiles are the Gateway API suite's profiles the harness runs
// (-conformance-profiles), core and extended: the four Gateway profiles,
// or those CONFORMANCE_GATEWAY_PROFILES lists (comma-separated), to run
// fewer while working on one.
var gatewayAPIProfiles = func() []string {
	if v := os.Getenv("CONFORMANCE_GATEWAY_PROFILES"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"GATEWAY-HTTP", "GATEWAY-GRPC", "GATEWAY-TLS", "GATEWAY-TCP"}
}()

const (
	// usableAddress is the address the suite's GatewayStaticAddresses asks
	// a Gateway to get (-usable-address): the last of the load-balancer
	// stand-in's pool (loadbalancer_test.go takes the first 250 of lbCIDR).
	usableAddress = "10.244.99.250"
	// unusableAddress is one no Gateway can get (-unusable-address):
	// TEST-NET-1 (RFC 5737), never on any link here.
	unusableAddress = "192.0.2.1"
)

// gatewayAPIArgs are the Gateway API suite's flags beyond suiteArgs: the
// profiles, and as -supported-features every core feature of them and
// every extended one some test exercises (TestList.Features). Our
// controller publishes in its GatewayClass status only the features it
// passes (gateway.SupportedFeatures); the flag claims every tested feature
// of the profiles, so that every extended test runs and a failure shows
// what infermesh lacks even if a feature were dropped from the class
// status (gateway-api-conformance.md, Setup).
func gatewayAPIArgs(cfg config, list TestList) ([]string, error) {
	features, err := list.Features(gatewayAPIProfiles)
	if err != nil {
		return nil, err
	}
	return append(suiteArgs(cfg),
		// The base manifests stay at the end: the harness tears the whole
		// cluster down. The v1.7.0 suite deletes them in t.Cleanup and
		// waits 30 s for each namespace to go, failing TestConformance
		// when the namespace controller has not finished by then.
		"-cleanup-base-resources=false",
		"-conformance-profiles="+strings.Join(gatewayAPIProfiles, ","),
		"-supported-features="+strings.Join(features, ","),
		"-usable-address="+usableAddress, "-unusable-address="+unusableAddress,
	), nil
}

// TestGatewayAPIConformance is `make conformance-gateway-api`: the Gateway
// API suite (v1.7.0 by default; its own test binary, unmodified), profiles
// GATEWAY-HTTP, GATEWAY-GRPC, GATEWAY-TLS and GATEWAY-TCP, core and
// extended, on its own cluster
// (gatewayAPICluster: the experimental-channel CRDs, its own pod and
// load-balancer ranges). Each test's result is Go's verdict line; the
// lines "<profile> core|extended: N passed, M failed, K skipped" go to
// CONFORMANCE_SUMMARY, counted from those verdicts by the suite's own
// profile rule, and the report is cross-checked against them (profiles.go).
func TestGatewayAPIConformance(t *testing.T) {
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	list, err := readTestListFile(cfg.testList)
	if err != nil {
		t.Fatal(err)
	}
	args, err := gatewayAPIArgs(cfg, list)
	if err != nil {
		t.Fatal(err)
	}
	c := setUp(t, cfg, gatewayAPICluster, bodyModeDefault)

	runErr := runSuite(cfg, c.env.Kubeconfig, args)
	verdicts, err := suiteVerdicts(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(verdicts) == 0 {
		t.Fatalf("the suite's output has no verdict line for any test: its setup failed (suite exit: %v; see %s)",
			runErr, filepath.Join(cfg.state, "suite.log"))
	}
	results := list.ByProfile(verdicts, gatewayAPIProfiles)
	var lines []string
	for _, r := range results {
		lines = append(lines, r.Line())
		if len(r.Failed) > 0 {
			t.Logf("%s failed: %s", r.Part, strings.Join(r.Failed, ", "))
		}
		if len(r.Skipped) > 0 {
			t.Logf("%s skipped: %s", r.Part, strings.Join(r.Skipped, ", "))
		}
	}
	// The counts are Go's; the report only confirms them, so it is
	// checked before they are written: a disagreement leaves no summary.
	data, err := os.ReadFile(cfg.report)
	if err != nil {
		t.Fatalf("the suite wrote no report (it writes one only when its setup completed): %v (suite exit: %v)", err, runErr)
	}
	report, err := ParseReportParts(data)
	if err != nil {
		t.Fatalf("report %s: %v", cfg.report, err)
	}
	notes, err := CheckReport(results, list, report)
	for _, n := range notes {
		t.Log(n)
	}
	if err != nil {
		t.Fatalf("%v\nGo's verdicts:\n%s", err, strings.Join(lines, "\n"))
	}
	text := strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(cfg.summary, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text)
	if runErr != nil {
		t.Errorf("the suite failed: %v", runErr)
	}
}

// readTestListFile reads hack/images.sh's tests.tsv.
func readTestListFile(path string) (TestList, error) {
	if path == "" {
		return TestList{}, errors.New("CONFORMANCE_TEST_LIST unset: run `make conformance-gateway-api` (hack/conformance.sh sets it)")
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return TestList{}, fmt.Errorf("%s: hack/images.sh SUITE=gateway-api writes it beside the suite binary", path)
	}
	if err != nil {
		return TestList{}, err
	}
	defer f.Close()
	l, err := ReadTestList(f)
	if err != nil {
		return l, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}
