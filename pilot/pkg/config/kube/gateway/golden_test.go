// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// The controller's goldens: each folder of testdata is a case, its inputs
// beside what the controller makes of them (testdata/README.md).
package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/infermesh/infermesh/pilot/pkg/bootstrap"
	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

var update = flag.Bool("update", false, "rewrite every golden of testdata/<case>/ from the current output (review the diff by hand)")

const (
	// goldenDir holds one folder per case.
	goldenDir = "testdata"
	// repoRoot is the repository's root from this package's folder; the
	// folders of a case's inputs.txt are relative to it.
	repoRoot = "../../../../.."
	// inputsFile, in a case folder, names the folders the case reads
	// instead of manifests of its own.
	inputsFile = "inputs.txt"
	// The goldens of a case.
	statusGolden = "status.golden"
	modelGolden  = "model.golden"
	// minCases is how many cases the corpus had when it was written; fewer
	// means cases were lost.
	minCases = 30
)

// goldenNow is the time of the run: lastTransitionTime in the status
// golden (status -f stamps the time it runs at).
var goldenNow = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// goldenEnv are the feature flags of every case: the defaults, with the
// inference extension on (as the seed's deployment runs).
func goldenEnv(name string) (string, bool) {
	if name == "ENABLE_GATEWAY_API_INFERENCE_EXTENSION" {
		return "true", true
	}
	return "", false
}

// TestGolden runs the controller as file mode does (bootstrap.FileController
// over the case's manifests, the path status -f and check -f take) on each
// case of testdata and compares two goldens beside its inputs:
// status.golden, every status document the controller would write
// (gateway.StatusDocuments, as status -f prints them, with any manifest
// the folder source rejected listed first), and model.golden, the
// translator's view of each Gateway (Outputs.Translator, model.Gateway).
// A missing or different golden fails; -update rewrites them all:
//
//	go test ./pilot/pkg/config/kube/gateway/ -run Golden -update
func TestGolden(t *testing.T) {
	cases := goldenCases(t)
	if len(cases) < minCases {
		t.Errorf("%d golden cases in %s, want at least %d", len(cases), goldenDir, minCases)
	}
	checkCaseIndex(t, cases)
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(goldenDir, name)
			status, model := runCase(t, dir)
			compareGolden(t, filepath.Join(dir, statusGolden), status)
			compareGolden(t, filepath.Join(dir, modelGolden), model)
		})
	}
}

// goldenCases are the folder names under testdata, sorted.
func goldenCases(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// checkCaseIndex fails unless testdata/README.md's table has one row per
// case, naming it in its first cell and saying what it shows in its second.
func checkCaseIndex(t *testing.T, cases []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 4 || !strings.HasPrefix(sc.Text(), "|") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if name == "case" || strings.Trim(name, "-") == "" {
			continue // the header and its rule
		}
		if !slices.Contains(cases, name) {
			t.Errorf("testdata/README.md describes case %q, which has no folder", name)
			continue
		}
		if strings.TrimSpace(cells[2]) == "" {
			t.Errorf("testdata/README.md: case %q does not say what it shows", name)
		}
		described[name] = true
	}
	for _, c := range cases {
		if !described[c] {
			t.Errorf("case %s is not in testdata/README.md's table: add a row saying what it shows", c)
		}
	}
}

// runCase computes a case's status and model goldens.
func runCase(t *testing.T, caseDir string) (status, modelText []byte) {
	t.Helper()
	dir, shown, origin := caseInputs(t, caseDir)
	stop := make(chan struct{})
	defer close(stop)
	opts := []krt.CollectionOption{krt.WithStop(stop)}
	src, err := file.New(dir, file.Options{Logger: slog.New(slog.DiscardHandler), Krt: opts})
	if err != nil {
		t.Fatal(err)
	}
	feats, err := features.Load(goldenEnv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := bootstrap.FileController(src, feats, opts)
	docs, err := gateway.StatusDocuments(ctx, c.Outputs, metav1.NewTime(goldenNow))
	if err != nil {
		t.Fatal(err)
	}

	var sb bytes.Buffer
	fmt.Fprintf(&sb, "# What the controller would write for %s (status -f).\n", shown)
	sb.WriteString("# Written by TestGolden; regenerate with: go test ./pilot/pkg/config/kube/gateway/ -run Golden -update\n")
	for _, p := range src.Problems() {
		p.File = origin(p.File)
		fmt.Fprintf(&sb, "# rejected: %s\n", p.Error())
	}
	if err := gateway.WriteStatusDocuments(&sb, docs); err != nil {
		t.Fatal(err)
	}

	if !c.Outputs.Translator.WaitUntilSynced(ctx.Done()) {
		t.Fatal("the Translator collection did not sync")
	}
	var mb bytes.Buffer
	fmt.Fprintf(&mb, "# The translator's view of each Gateway (model.Gateway) for %s.\n", shown)
	mb.WriteString("# Written by TestGolden; regenerate with: go test ./pilot/pkg/config/kube/gateway/ -run Golden -update\n")
	for _, gw := range c.Outputs.Translator.List() {
		out, err := modelYAML(gw)
		if err != nil {
			t.Fatalf("Gateway %s: %v", gw.ResourceName(), err)
		}
		fmt.Fprintf(&mb, "--- # Gateway %s\n%s", gw.ResourceName(), out)
	}
	return sb.Bytes(), mb.Bytes()
}

// caseInputs is the folder of manifests the case reads, how its goldens
// name it, and the path in the repository of a file of that folder. A case holds its manifests itself, or names in
// inputs.txt the folders it reads (relative to the repository root, one a
// line, # comments): their manifests in order, a file of a later folder
// replacing the earlier one at the same relative path (as
// pilot-discovery's testdata/check/NAME replaces the seed's files). Such a
// case holds no manifests of its own, so a folder is read one way only.
func caseInputs(t *testing.T, caseDir string) (dir, shown string, origin func(rel string) string) {
	t.Helper()
	own := manifestsIn(t, caseDir)
	b, err := os.ReadFile(filepath.Join(caseDir, inputsFile))
	if errors.Is(err, fs.ErrNotExist) {
		if len(own) == 0 {
			t.Fatalf("%s: no manifests and no %s", caseDir, inputsFile)
		}
		return caseDir, filepath.ToSlash(caseDir), func(rel string) string { return path.Join(filepath.ToSlash(caseDir), rel) }
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(own) > 0 {
		t.Fatalf("%s: has both %s and manifests of its own (%s); a case reads one or the other", caseDir, inputsFile, own[0])
	}
	var folders []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			folders = append(folders, line)
		}
	}
	if len(folders) == 0 {
		t.Fatalf("%s: names no folder", filepath.Join(caseDir, inputsFile))
	}
	from := map[string]string{} // relative path -> repository path
	for _, f := range folders {
		files := manifestsIn(t, filepath.Join(repoRoot, f))
		if len(files) == 0 {
			t.Fatalf("%s: folder %s holds no manifests", filepath.Join(caseDir, inputsFile), f)
		}
		for _, rel := range files {
			from[rel] = path.Join(f, rel)
		}
	}
	dir = t.TempDir()
	for rel, repoPath := range from {
		data, err := os.ReadFile(filepath.Join(repoRoot, repoPath))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, strings.Join(folders, " + "), func(rel string) string {
		if p, ok := from[rel]; ok {
			return p
		}
		return rel
	}
}

// manifestsIn are the manifests (*.yaml, *.yml, *.json, as the folder
// source reads them) under dir, as slash-separated relative paths.
func manifestsIn(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compareGolden compares got with the golden at path, or rewrites it with
// -update.
func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("golden %s: %v (write it with -update, then review it by hand)", path, err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-golden +now); if the change is intended, rerun with -update and review the diff:\n%s",
			path, cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")))
	}
}

// modelYAML is gw as YAML: the model's fields by their Go names, the
// route rules and filters as the Gateway API writes them (as they are);
// the model's fields that are absent, empty or false are left out, and
// each PEM bundle is shown as one line per certificate (its subject and a
// fingerprint).
func modelYAML(gw model.Gateway) ([]byte, error) {
	raw, err := json.Marshal(gw)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, err
	}
	tree, _ = compact(tree, "")
	return yaml.Marshal(tree)
}

// pemFields are the model's []byte fields holding PEM bundles, which JSON
// gives as base64.
var pemFields = []string{"CACertificates", "PEM"}

// apiFields are the model's fields that hold Gateway API types, kept as
// their JSON is (it leaves out what is unset by itself).
var apiFields = []string{"HTTP", "GRPC", "HTTPFilters", "GRPCFilters"}

// compact drops nulls, empty strings, empty lists and maps and false from v,
// a value of the model's field key, and turns the PEM fields into
// certificate summaries; keep is false when v itself is dropped.
func compact(v any, key string) (out any, keep bool) {
	if slices.Contains(apiFields, key) {
		switch x := v.(type) {
		case []any:
			return x, len(x) > 0
		case map[string]any:
			return x, len(x) > 0
		}
		return v, v != nil
	}
	switch x := v.(type) {
	case nil:
		return nil, false
	case bool:
		return x, x
	case string:
		if x == "" {
			return nil, false
		}
		if slices.Contains(pemFields, key) {
			return pemSummary(x), true
		}
		return x, true
	case []any:
		var l []any
		for _, e := range x {
			if c, ok := compact(e, ""); ok {
				l = append(l, c)
			}
		}
		return l, len(l) > 0
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			if c, ok := compact(e, k); ok {
				m[k] = c
			}
		}
		return m, len(m) > 0
	}
	return v, true
}

// pemSummary describes the base64 of a PEM bundle: one line per block.
func pemSummary(b64 string) []string {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return []string{"not base64: " + err.Error()}
	}
	var out []string
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		sum := sha256.Sum256(block.Bytes)
		line := block.Type + " sha256:" + hex.EncodeToString(sum[:8])
		if block.Type == "CERTIFICATE" {
			if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
				line += " subject=" + cert.Subject.String()
			} else {
				line += " (does not parse)"
			}
		}
		out = append(out, line)
	}
	if rest := strings.TrimSpace(string(data)); rest != "" {
		out = append(out, fmt.Sprintf("%d bytes that are not PEM", len(rest)))
	}
	return out
}
