// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// podTemplate is the pod template of a workload manifest: the labels its
// pods get, in its namespace.
type podTemplate struct {
	kind, namespace, name string
	labels                map[string]string
}

// workloadKinds are the kinds whose pods an InferencePool may select in a
// cluster, by apiVersion.
var workloadKinds = map[string]map[string]bool{
	"apps/v1":  {"Deployment": true, "StatefulSet": true, "DaemonSet": true, "ReplicaSet": true},
	"batch/v1": {"Job": true, "CronJob": true},
}

// readPodTemplates reads the pod templates of the workload manifests under
// dir, as the file source walks it (names starting with "." skipped;
// .yaml, .yml and .json files). The file source keeps no workloads (file
// mode's pods are the folder's Pods), so check reads their templates here,
// best effort: a document that does not parse is skipped (the file source
// reports it).
func readPodTemplates(dir string) []podTemplate {
	var out []podTemplate
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p != dir && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, []byte("template")) {
			return nil
		}
		out = append(out, podTemplatesIn(data)...)
		return nil
	})
	return out
}

// workload is what podTemplatesIn reads of a workload manifest.
type workload struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Template    templateSpec `json:"template"`
		JobTemplate struct {
			Spec struct {
				Template templateSpec `json:"template"`
			} `json:"spec"`
		} `json:"jobTemplate"`
	} `json:"spec"`
}

type templateSpec struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
}

// podTemplatesIn reads the workloads of one file's YAML documents.
func podTemplatesIn(data []byte) []podTemplate {
	var out []podTemplate
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if err != nil { // io.EOF, or a document that does not split
			return out
		}
		var w workload
		if yaml.Unmarshal(doc, &w) != nil || !workloadKinds[w.APIVersion][w.Kind] {
			continue
		}
		t := podTemplate{kind: w.Kind, namespace: w.Metadata.Namespace, name: w.Metadata.Name, labels: w.Spec.Template.Metadata.Labels}
		if w.Kind == "CronJob" {
			t.labels = w.Spec.JobTemplate.Spec.Template.Metadata.Labels
		}
		if t.namespace == "" {
			t.namespace = "default"
		}
		out = append(out, t)
	}
}
