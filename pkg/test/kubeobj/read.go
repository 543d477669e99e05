// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeobj

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// Files returns the *.yaml files of dir in name order, the order
// `kubectl apply -f dir` applies them in (manifests/ names its files so that
// this is the install order). A folder without any is an error.
func Files(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no YAML files in %s", dir)
	}
	slices.Sort(files)
	return files, nil
}

// Read parses every document of files, in order, skipping empty documents.
func Read(files ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		got, err := Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		objs = append(objs, got...)
	}
	return objs, nil
}

// Parse parses every document of a YAML (or JSON) stream, in order, skipping
// empty documents.
func Parse(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(u.Object) == 0 { // an empty document
			continue
		}
		objs = append(objs, u)
	}
}
