// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/features"
)

// repoRoot is the repository's root, from this package's folder.
const repoRoot = "../../.."

// manifestCorpus is one set of manifests the equivalence test reads, as
// the -f paths a user would give.
type manifestCorpus struct {
	name  string
	paths []string
}

// Where the folders of manifests live, relative to repoRoot, and how each
// is read (manifestCorpora).
const (
	examplesDir    = "examples"
	checkDir       = "pilot/cmd/pilot-discovery/testdata/check"
	equivalenceDir = "pilot/cmd/pilot-discovery/testdata/equivalence"
	goldenDir      = "pilot/pkg/config/kube/gateway/testdata"
	// envoyCorpusDir holds Envoy's router_check tests (route
	// configurations and their expectations), not Kubernetes manifests:
	// the test data plane's TestEnvoyRouterCheckCorpus reads it.
	envoyCorpusDir = "pkg/test/dataplane/testdata/envoy-router-check"
)

// manifestCorpora finds every folder holding manifests (*.yaml, *.yml,
// *.json) under a testdata or examples folder of the repository, and reads
// each as its users do:
//
//   - examples/NAME: the folder with its subfolders, as examples/README.md
//     runs it (-f examples/seed);
//   - testdata/check/NAME: with the seed's other manifests, as TestCheck
//     and testdata/check/README.md run it (a file of the folder replaces
//     the seed's file of the same name);
//   - testdata/equivalence/NAME: the folder alone;
//   - the controller's golden cases (pilot/pkg/config/kube/gateway/testdata/NAME):
//     the folder alone. A case that reads other folders (its inputs.txt
//     names them) holds no manifests, and those folders are read above.
//
// A folder of manifests anywhere else under testdata or examples fails the
// test until it is given a way to be read here, so no corpus is left out.
// (The repository's other testdata hold no manifests: xDS goldens
// *.yaml.golden, Envoy config dumps *.json.txt, and Envoy's route table
// tests, envoyCorpusDir, which are Envoy's own configuration.)
func manifestCorpora(t *testing.T) []manifestCorpus {
	t.Helper()
	seen := map[string]bool{}
	var out []manifestCorpus
	err := filepath.WalkDir(repoRoot, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if n := e.Name(); p != repoRoot && (strings.HasPrefix(n, ".") || n == "out" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		parts := strings.Split(rel, "/")
		if !slices.Contains(parts[:len(parts)-1], "testdata") && !slices.Contains(parts[:len(parts)-1], "examples") {
			return nil
		}
		var c manifestCorpus
		switch {
		case strings.HasPrefix(rel, envoyCorpusDir+"/"):
			return nil
		case strings.HasPrefix(rel, examplesDir+"/") && len(parts) > 2:
			c.name = examplesDir + "/" + parts[1]
			c.paths = []string{filepath.Join(repoRoot, examplesDir, parts[1])}
		case strings.HasPrefix(rel, checkDir+"/") && len(parts) > strings.Count(checkDir, "/")+2:
			name := parts[strings.Count(checkDir, "/")+1]
			c.name = checkDir + "/" + name
			dir := filepath.Join(repoRoot, checkDir, name)
			c.paths = append(seedPaths(t, overlaidNames(t, dir)...), dir)
		case strings.HasPrefix(rel, equivalenceDir+"/") && len(parts) > strings.Count(equivalenceDir, "/")+2:
			name := parts[strings.Count(equivalenceDir, "/")+1]
			c.name = equivalenceDir + "/" + name
			c.paths = []string{filepath.Join(repoRoot, equivalenceDir, name)}
		case strings.HasPrefix(rel, goldenDir+"/") && len(parts) > strings.Count(goldenDir, "/")+2:
			name := parts[strings.Count(goldenDir, "/")+1]
			c.name = goldenDir + "/" + name
			c.paths = []string{filepath.Join(repoRoot, goldenDir, name)}
		default:
			t.Errorf("%s: a manifest under testdata or examples that the equivalence test does not read; "+
				"put it in a corpus folder manifestCorpora knows, or teach it how the folder is read", rel)
			return nil
		}
		if !seen[c.name] {
			seen[c.name] = true
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// overlaidNames are the names of dir's files: the seed files they replace.
func overlaidNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// seedPaths are the seed's manifest files except those named in skip.
func seedPaths(t *testing.T, skip ...string) []string {
	t.Helper()
	var out []string
	for _, a := range seedArgs(t, skip...) {
		if a != "-f" {
			out = append(out, a)
		}
	}
	return out
}

// TestFileModeServesWhatStatusReports runs status -f and discovery -f on
// every folder of manifests in the repository (manifestCorpora) and
// compares, for each Gateway, the listeners and routes status reports with
// the LDS and RDS resources discovery -f serves over ADS to the Gateway's
// proxy (compareServed says how).
func TestFileModeServesWhatStatusReports(t *testing.T) {
	corpora := manifestCorpora(t)
	var names []string
	for _, c := range corpora {
		names = append(names, c.name)
	}
	// The corpora this test was written with; more may come.
	for _, want := range []string{
		"examples/seed", checkDir + "/listenerset-not-allowed", checkDir + "/bad-regex",
		equivalenceDir + "/listenersets", equivalenceDir + "/https", equivalenceDir + "/routes", equivalenceDir + "/refused",
		equivalenceDir + "/streams", equivalenceDir + "/listenerfilters",
		goldenDir + "/pool-two-gateways", goldenDir + "/tenant-hostname-takeover",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("corpus %s not found among %q", want, names)
		}
	}
	compared := 0
	for _, c := range corpora {
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) { compared += checkEquivalence(t, c.paths) })
	}
	// A reading of status or of the served resources that finds nothing
	// would compare nothing and pass.
	if compared < 20 {
		t.Errorf("only %d served route rules compared over every corpus; the test reads status or ADS wrong", compared)
	}
}

// corpusFeatures are the NAME=value lines of the features.env file of each
// folder of paths that has one: the feature flags the folder is read with
// (a folder of experimental-channel manifests sets
// PILOT_FILE_GATEWAY_API_CHANNEL=experimental), flattened as envOf takes
// them.
func corpusFeatures(t *testing.T, paths []string) []string {
	t.Helper()
	var kv []string
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(p, "features.env"))
		if err != nil {
			continue // no such file, or p is a file
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			name, value, ok := strings.Cut(strings.TrimSpace(line), "=")
			if !ok {
				t.Fatalf("%s/features.env: %q is not NAME=value", p, line)
			}
			kv = append(kv, name, value)
		}
	}
	return kv
}

// checkEquivalence compares status -f and discovery -f over paths and
// returns how many served route rules (per hostname) it compared.
func checkEquivalence(t *testing.T, paths []string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := envOf(append(slices.Clone(inference), corpusFeatures(t, paths)...)...)

	// What status -f prints.
	r, err := runOffline(ctx, paths, nil, env, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatalf("status -f: %v", err)
	}
	var printed, stderr bytes.Buffer
	// Rejected manifests and what no status can say (errNotInStatus: a
	// parentRef to nothing, a pool without pods, a certificate outside its
	// validity) change nothing served; the comparison covers the rest.
	if err := printStatus(&printed, &stderr, r); err != nil && !errors.Is(err, errManifestProblems) && !errors.Is(err, errNotInStatus) {
		t.Fatalf("status -f: %v", err)
	}
	st := parsePrintedStatus(t, printed.String())

	// What discovery -f serves.
	feats, err := features.Load(env)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stageManifests(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.cleanup()
	src, err := file.New(m.dir, fileOptions(slog.New(slog.DiscardHandler), feats))
	if err != nil {
		t.Fatal(err)
	}
	p, err := startInProcess(ctx, src, feats, strings.Join(paths, ", "))
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()

	compared := 0
	for _, gw := range src.Gateways().List() {
		key := gw.Namespace + "/" + gw.Name
		_, published, err := p.srv.XDS().ConfigDump(key)
		if err != nil {
			t.Fatal(err)
		}
		gst, ours := st.gateways[key]
		if !ours {
			if published {
				t.Errorf("Gateway %s: status -f reports nothing for it (not of our class), but discovery -f serves it", key)
			}
			continue
		}
		var served proxyResources
		if published {
			served, err = p.ads().Fetch(ctx, gatewayRef{Namespace: gw.Namespace, Name: gw.Name})
			if err != nil {
				t.Fatalf("Gateway %s: ADS: %v", key, err)
			}
		}
		claims := claimedListeners(t, src, st, gw, gst)
		attachments := routeAttachments(t, src, st, key)
		compared += compareServed(t, key, claims, attachments, served)
	}
	return compared
}
