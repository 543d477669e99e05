// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// The modules whose own manifests hold the CRDs that WithStandardCRDs installs,
// at the versions the main module's go.mod requires.
const (
	gatewayAPIModule = "sigs.k8s.io/gateway-api"
	inferenceModule  = "sigs.k8s.io/gateway-api-inference-extension"
)

// GatewayAPICRDs returns the paths of the Gateway API standard-channel CRD
// manifests (config/crd/standard/*.yaml) of the sigs.k8s.io/gateway-api version
// in go.mod, sorted. One of them holds a ValidatingAdmissionPolicy, which
// ApplyCRDs skips.
func GatewayAPICRDs() ([]string, error) { return gatewayAPIChannelCRDs("standard") }

// GatewayAPIExperimentalCRDs returns the paths of the Gateway API
// experimental-channel CRD manifests (config/crd/experimental/*.yaml, the
// gateway.networking.k8s.io and gateway.networking.x-k8s.io kinds, without
// kustomization.yaml) of the sigs.k8s.io/gateway-api version in go.mod,
// sorted. Only one channel can be installed: the experimental CRDs replace
// the standard ones of the same kinds, and each carries the
// gateway.networking.k8s.io/channel annotation "experimental".
func GatewayAPIExperimentalCRDs() ([]string, error) { return gatewayAPIChannelCRDs("experimental") }

// GatewayAPICRDsAt returns the paths of the Gateway API CRD manifests of
// channel ("standard" or "experimental") at version, which need not be the
// one go.mod requires: a conformance suite checks that the installed CRDs
// carry exactly the bundle version it was built against (the GIE suite
// v1.6.0 is built against Gateway API v1.6.1). The module is downloaded if
// the module cache lacks it.
func GatewayAPICRDsAt(channel, version string) ([]string, error) {
	dir, err := pinnedModuleDir(gatewayAPIModule, version)
	if err != nil {
		return nil, err
	}
	return channelCRDs(dir, channel)
}

func gatewayAPIChannelCRDs(channel string) ([]string, error) {
	dir, err := moduleDir(gatewayAPIModule)
	if err != nil {
		return nil, err
	}
	return channelCRDs(dir, channel)
}

func channelCRDs(dir, channel string) ([]string, error) {
	if channel != "standard" && channel != "experimental" {
		return nil, fmt.Errorf("kubeenv: Gateway API channel %q: want standard or experimental", channel)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "config", "crd", channel, "gateway.networking.*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("kubeenv: %w", err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("kubeenv: no CRD manifests in %s/config/crd/%s", dir, channel)
	}
	slices.Sort(paths)
	return paths, nil
}

// InferencePoolCRD returns the path of the InferencePool CRD manifest
// (inference.networking.k8s.io) of the sigs.k8s.io/gateway-api-inference-extension
// version in go.mod.
func InferencePoolCRD() (string, error) {
	dir, err := moduleDir(inferenceModule)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "config", "crd", "bases", "inference.networking.k8s.io_inferencepools.yaml")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("kubeenv: InferencePool CRD: %w", err)
	}
	return path, nil
}

// StandardCRDs returns GatewayAPICRDs followed by InferencePoolCRD.
func StandardCRDs() ([]string, error) {
	paths, err := GatewayAPICRDs()
	if err != nil {
		return nil, err
	}
	pool, err := InferencePoolCRD()
	if err != nil {
		return nil, err
	}
	return append(paths, pool), nil
}

// WithStandardCRDs makes Start install StandardCRDs (after those of WithCRDs)
// and wait until each is Established; see Env.ApplyStandardCRDs.
func WithStandardCRDs() Option {
	return func(o *options) { o.standardCRDs = true }
}

// ApplyStandardCRDs installs StandardCRDs with ApplyCRDs: the Gateway API
// standard channel and the InferencePool CRD at the versions in go.mod, read
// from the modules' own manifests in the module cache. It fails the test when
// the manifests cannot be found.
func (e *Env) ApplyStandardCRDs() {
	e.t.Helper()
	paths, err := StandardCRDs()
	if err != nil {
		e.t.Fatal(err)
	}
	e.ApplyCRDs(paths...)
}

var moduleDirs sync.Map // module path → result of findModuleDir

type moduleDirResult struct {
	dir string
	err error
}

// moduleDir returns the folder of module at the version the main module
// requires, downloading it (go mod download) if the module cache lacks it.
// Results are memoized for the life of the test binary.
func moduleDir(module string) (string, error) {
	if r, ok := moduleDirs.Load(module); ok {
		return r.(moduleDirResult).dir, r.(moduleDirResult).err
	}
	dir, err := findModuleDir(module)
	moduleDirs.Store(module, moduleDirResult{dir, err})
	return dir, err
}

func findModuleDir(module string) (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("kubeenv: the go command is needed to find the CRD manifests in the module cache: %w", err)
	}
	// Run in the test's working directory, which is inside the main module, so
	// go list answers with the version that go.mod requires. -mod=mod keeps a
	// vendor folder, if there ever is one, from hiding the module's manifests.
	out, err := runGo(goCmd, "list", "-mod=mod", "-m", "-f", "{{.Version}} {{.Dir}}", module)
	if err != nil {
		return "", err
	}
	version, dir, _ := strings.Cut(strings.TrimSpace(out), " ")
	if dir != "" {
		return dir, nil
	}
	// Not in the module cache yet: download exactly that version.
	out, err = runGo(goCmd, "mod", "download", "-json", module+"@"+version)
	if err != nil {
		return "", err
	}
	var dl struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(out), &dl); err != nil {
		return "", fmt.Errorf("kubeenv: go mod download %s@%s: %w", module, version, err)
	}
	if dl.Error != "" || dl.Dir == "" {
		return "", fmt.Errorf("kubeenv: go mod download %s@%s: no folder: %s", module, version, dl.Error)
	}
	return dl.Dir, nil
}

func runGo(goCmd string, args ...string) (string, error) {
	cmd := exec.Command(goCmd, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubeenv: go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
