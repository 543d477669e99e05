// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// suiteArgs are the suite binary's flags (conformance.md §1): our class,
// the report, no Go test timeout (every wait of the suite is bounded, the
// longest 300 s per step), and -run-test for one test.
func suiteArgs(cfg config) []string {
	args := []string{
		"-test.v", "-test.timeout=0", "-test.run=^TestConformance$",
		"-gateway-class=" + gatewayClass,
		"-report-output=" + cfg.report,
		"-organization=infermesh", "-project=infermesh",
		"-url=https://github.com/infermesh/infermesh", "-version=dev", "-contact=infermesh maintainers",
	}
	if cfg.runTest != "" {
		args = append(args, "-run-test="+cfg.runTest)
	}
	return args
}

// runSuite runs the suite's own test binary against kubeconfig, its
// output to ours and to state/suite.log; a failing test is no error here
// (the report says which).
func runSuite(cfg config, kubeconfig string) error {
	logf, err := os.Create(filepath.Join(cfg.state, "suite.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(cfg.suite, suiteArgs(cfg)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout = io.MultiWriter(os.Stdout, logf)
	cmd.Stderr = cmd.Stdout
	// The suite's embedded manifests need no working directory; run it in
	// the state folder so nothing lands in the repository.
	cmd.Dir = cfg.state
	return cmd.Run()
}

// report is the part of the suite's report YAML (a gateway-api
// ConformanceReport) the summary reads.
type report struct {
	Profiles []struct {
		Name string `json:"name"`
		Core struct {
			Statistics  statistics `json:"statistics"`
			FailedTests []string   `json:"failedTests"`
		} `json:"core"`
		Extended *struct {
			Statistics statistics `json:"statistics"`
		} `json:"extended"`
	} `json:"profiles"`
}

type statistics struct {
	Passed, Failed, Skipped int
}

// summarize reads the report and returns "N passed, M failed, K skipped"
// over every profile's core and extended tests.
func summarize(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the suite wrote no report (it writes one only when its setup completed): %w", err)
	}
	var r report
	if err := yaml.Unmarshal(data, &r); err != nil {
		return "", fmt.Errorf("report %s: %w", path, err)
	}
	var s statistics
	for _, p := range r.Profiles {
		s.Passed += p.Core.Statistics.Passed
		s.Failed += p.Core.Statistics.Failed
		s.Skipped += p.Core.Statistics.Skipped
		if p.Extended != nil {
			s.Passed += p.Extended.Statistics.Passed
			s.Failed += p.Extended.Statistics.Failed
			s.Skipped += p.Extended.Statistics.Skipped
		}
	}
	return fmt.Sprintf("%d passed, %d failed, %d skipped", s.Passed, s.Failed, s.Skipped), nil
}
