// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// config is what hack/conformance.sh passes in the environment.
type config struct {
	// images is hack/images.sh's folder (images.tsv).
	images string
	// suite is the suite's test binary (gie-conformance.test or
	// gwapi-conformance.test).
	suite string
	// testList is the Gateway API suite's tests.tsv (hack/images.sh):
	// its tests and profiles, to count verdicts by profile.
	testList string
	// report is where the suite writes its report YAML.
	report string
	// summary receives the line "N passed, M failed, K skipped".
	summary string
	// runTest is one test's short name (the suite's -run-test), or "".
	runTest string
	// state keeps the node's pod folders and logs, and the suite's output.
	state string
	// repo is the repository root (manifests/).
	repo string
	// skipTests are short names passed to the suite's -skip-tests.
	skipTests string
	// bodyMode is bodyModeDefault (a class without parameters, the
	// default), or the class's eppRequestBodyMode ("Streamed" for EPPs
	// older than lwepp v1.6.1).
	bodyMode string
}

// bodyModeDefault (CONFORMANCE_EPP_BODY_MODE=default) leaves the
// GatewayClass without parametersRef: FULL_DUPLEX_STREAMED.
const bodyModeDefault = "default"

func configFromEnv() (config, error) {
	c := config{
		images:   os.Getenv("CONFORMANCE_IMAGES"),
		suite:    os.Getenv("CONFORMANCE_SUITE"),
		testList: os.Getenv("CONFORMANCE_TEST_LIST"),
		report:   os.Getenv("CONFORMANCE_REPORT"),
		summary:  os.Getenv("CONFORMANCE_SUMMARY"),
		runTest:  os.Getenv("CONFORMANCE_RUN_TEST"),
		state:    os.Getenv("CONFORMANCE_STATE"),

		skipTests: os.Getenv("CONFORMANCE_SKIP_TESTS"),
		bodyMode:  os.Getenv("CONFORMANCE_EPP_BODY_MODE"),
	}
	switch c.bodyMode {
	case "":
		c.bodyMode = bodyModeDefault
	case "Streamed", "FullDuplexStreamed", bodyModeDefault:
	default:
		return c, fmt.Errorf("CONFORMANCE_EPP_BODY_MODE=%q: want Streamed, FullDuplexStreamed or default", c.bodyMode)
	}
	var missing []string
	for name, v := range map[string]string{"CONFORMANCE_IMAGES": c.images, "CONFORMANCE_SUITE": c.suite,
		"CONFORMANCE_REPORT": c.report, "CONFORMANCE_SUMMARY": c.summary, "CONFORMANCE_STATE": c.state} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("%s unset: run `make conformance` (hack/conformance.sh sets them)", strings.Join(missing, ", "))
	}
	wd, err := os.Getwd() // go test runs in the package folder
	if err != nil {
		return c, err
	}
	c.repo = filepath.Clean(filepath.Join(wd, "..", ".."))
	return c, nil
}
