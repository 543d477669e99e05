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
	if cfg.skipTests != "" {
		args = append(args, "-skip-tests="+cfg.skipTests)
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
			Statistics  statistics `json:"statistics"`
			FailedTests []string   `json:"failedTests"`
		} `json:"extended"`
	} `json:"profiles"`
}

type statistics struct {
	Passed, Failed, Skipped int
}

// readReport reads the suite's report: totals over every profile's core
// and extended tests, and the failed tests it lists.
func readReport(path string) (ReportStats, error) {
	var st ReportStats
	data, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("the suite wrote no report (it writes one only when its setup completed): %w", err)
	}
	var r report
	if err := yaml.Unmarshal(data, &r); err != nil {
		return st, fmt.Errorf("report %s: %w", path, err)
	}
	for _, p := range r.Profiles {
		st.Passed += p.Core.Statistics.Passed
		st.Failed += p.Core.Statistics.Failed
		st.Skipped += p.Core.Statistics.Skipped
		st.FailedTests = append(st.FailedTests, p.Core.FailedTests...)
		if p.Extended != nil {
			st.Passed += p.Extended.Statistics.Passed
			st.Failed += p.Extended.Statistics.Failed
			st.Skipped += p.Extended.Statistics.Skipped
			st.FailedTests = append(st.FailedTests, p.Extended.FailedTests...)
		}
	}
	return st, nil
}

// summary is the last line of `make conformance`: passed and failed by
// Go's verdicts, skipped as the report counts them (tests the suite did
// not start print no verdict line). It is computed only once Check found
// the two agreeing.
func summary(v Verdicts, r ReportStats) string {
	p, f, _ := v.Count()
	return fmt.Sprintf("%d passed, %d failed, %d skipped", p, f, r.Skipped)
}
