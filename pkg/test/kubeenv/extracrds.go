// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// Modules outside go.mod whose manifests hold CRDs the tests need, pinned
// here. They are fetched into the module cache with `go mod download` and
// never added to go.mod.
const (
	// InferenceObjectiveVersion is the GIE version whose InferenceObjective CRD
	// (inference.networking.x-k8s.io) the full v1.0.0 endpoint picker needs.
	InferenceObjectiveVersion = "v1.0.0"
	// IstioAPIVersion is the istio.io/api version whose DestinationRule CRD
	// DestinationRuleCRD returns.
	IstioAPIVersion = "v1.32.0"

	istioAPIModule = "istio.io/api"
	// destinationRuleCRDName is the one CRD taken from istio.io/api.
	destinationRuleCRDName = "destinationrules.networking.istio.io"
)

// InferenceObjectiveCRD returns the path of the InferenceObjective CRD manifest
// (inferenceobjectives.inference.networking.x-k8s.io) of
// sigs.k8s.io/gateway-api-inference-extension InferenceObjectiveVersion, and only
// that one: not that version's InferencePool CRDs, which WithStandardCRDs
// installs at the version in go.mod instead.
func InferenceObjectiveCRD() (string, error) {
	dir, err := pinnedModuleDir(inferenceModule, InferenceObjectiveVersion)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "config", "crd", "bases", "inference.networking.x-k8s.io_inferenceobjectives.yaml")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("kubeenv: InferenceObjective CRD: %w", err)
	}
	return path, nil
}

// DestinationRuleCRD returns the path of a JSON file holding only the
// destinationrules.networking.istio.io CRD, taken from
// kubernetes/customresourcedefinitions.gen.yaml of istio.io/api IstioAPIVersion
// (which holds all of Istio's CRDs). The file is written once into
// os.TempDir()/kubeenv-crds/ and reused.
func DestinationRuleCRD() (string, error) {
	dir, err := pinnedModuleDir(istioAPIModule, IstioAPIVersion)
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "kubernetes", "customresourcedefinitions.gen.yaml")
	doc, err := extractCRD(src, destinationRuleCRDName)
	if err != nil {
		return "", err
	}
	outDir := filepath.Join(os.TempDir(), "kubeenv-crds", "istio-api-"+IstioAPIVersion)
	out := filepath.Join(outDir, destinationRuleCRDName+".json")
	if old, err := os.ReadFile(out); err == nil && bytes.Equal(old, doc) {
		return out, nil
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("kubeenv: %w", err)
	}
	// Write and rename, so concurrent test binaries never read half a file.
	tmp, err := os.CreateTemp(outDir, ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("kubeenv: %w", err)
	}
	_, werr := tmp.Write(doc)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("kubeenv: %w", err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("kubeenv: %w", err)
	}
	return out, nil
}

// extractCRD returns, as JSON, the one CustomResourceDefinition named name
// among the documents of the YAML file at path.
func extractCRD(path, name string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeenv: CRDs: %w", err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var found []byte
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("kubeenv: CRDs in %s: %w", path, err)
		}
		meta, _ := obj["metadata"].(map[string]any)
		if obj["kind"] != "CustomResourceDefinition" || meta["name"] != name {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("kubeenv: %s holds CRD %s twice", path, name)
		}
		if found, err = json.Marshal(obj); err != nil {
			return nil, fmt.Errorf("kubeenv: CRD %s: %w", name, err)
		}
	}
	if found == nil {
		return nil, fmt.Errorf("kubeenv: no CRD %s in %s", name, path)
	}
	return found, nil
}

// pinnedModuleDir returns the module cache folder of module@version, running
// `go mod download` (outside the main module, so go.mod and go.sum are never
// touched) when it is missing. Results are memoized like moduleDir's.
func pinnedModuleDir(module, version string) (string, error) {
	key := module + "@" + version
	if r, ok := moduleDirs.Load(key); ok {
		return r.(moduleDirResult).dir, r.(moduleDirResult).err
	}
	dir, err := downloadModule(module, version)
	moduleDirs.Store(key, moduleDirResult{dir, err})
	return dir, err
}

func downloadModule(module, version string) (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("kubeenv: the go command is needed to fetch the CRD manifests of %s@%s: %w", module, version, err)
	}
	cmd := exec.Command(goCmd, "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); jerr == nil && dl.Error != "" {
		return "", fmt.Errorf("kubeenv: go mod download %s@%s: %s", module, version, dl.Error)
	}
	if err != nil {
		return "", fmt.Errorf("kubeenv: go mod download %s@%s: %w: %s", module, version, err, bytes.TrimSpace(stderr.Bytes()))
	}
	if dl.Dir == "" {
		return "", fmt.Errorf("kubeenv: go mod download %s@%s: no folder in %q", module, version, out)
	}
	return dl.Dir, nil
}
