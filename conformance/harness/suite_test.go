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
)

// suiteArgs are the flags both suites' binaries take (conformance.md §1,
// gateway-api-conformance.md, Setup): our class, the report with the
// implementation fields it requires, no Go test timeout (every wait of the
// suites is bounded, the longest 300 s per step), -run-test for one test
// and -skip-tests.
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

// runSuite runs the suite's own test binary with args against
// kubeconfig, its output to ours and to state/suite.log; a failing test
// is no error here (the verdicts say which).
func runSuite(cfg config, kubeconfig string, args []string) error {
	logf, err := os.Create(filepath.Join(cfg.state, "suite.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(cfg.suite, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout = io.MultiWriter(os.Stdout, logf)
	cmd.Stderr = cmd.Stdout
	// The suite's embedded manifests need no working directory; run it in
	// the state folder so nothing lands in the repository.
	cmd.Dir = cfg.state
	return cmd.Run()
}

// readReport reads the suite's report: totals over every profile's core
// and extended tests, and the failed tests it lists.
func readReport(path string) (ReportStats, error) {
	var st ReportStats
	data, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("the suite wrote no report (it writes one only when its setup completed): %w", err)
	}
	parts, err := ParseReportParts(data)
	if err != nil {
		return st, fmt.Errorf("report %s: %w", path, err)
	}
	for _, p := range parts {
		st.Passed += p.Passed
		st.Failed += p.Failed
		st.Skipped += p.Skipped
		st.FailedTests = append(st.FailedTests, p.FailedTests...)
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
