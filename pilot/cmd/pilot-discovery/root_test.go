// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/infermesh/infermesh/pkg/version"
)

func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), "pilot-discovery "+version.Version; got != want {
		t.Fatalf("version output = %q, want %q", got, want)
	}
}

func TestUnknownCommandFails(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"no-such-command"})
	if err := cmd.Execute(); err == nil {
		t.Fatal("unknown command succeeded")
	}
}

func TestHelpListsFeatureFlags(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ENABLE_GATEWAY_API_INFERENCE_EXTENSION (bool, default false)", "PILOT_GATEWAY_API_CONTROLLER_NAME"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestDiscoveryHelpSaysWhatNoAuthExposes: discovery --help says, in the
// command's text and on --xds-auth, that without proxy authorization any
// client naming a Gateway reads its configuration and private keys.
func TestDiscoveryHelpSaysWhatNoAuthExposes(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"discovery", "--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"WITHOUT IT (--xds-auth=none, the default, and always in file mode) ANY CLIENT THAT REACHES --ads-address AND NAMES A GATEWAY READS ITS CONFIGURATION AND THE PRIVATE KEYS OF ITS HTTPS LISTENERS",
		"none (any client that names a Gateway reads its configuration and HTTPS private keys)",
		"--xds-auth-audience", "PILOT_GATEWAY_XDS_TOKEN_AUDIENCE", "--xds-auth-recheck duration",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("discovery --help lacks %q", want)
		}
	}
}
