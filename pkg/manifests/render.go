// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package manifests

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
)

const (
	// ChartDir is the chart's folder, from the repository root.
	ChartDir = "manifests/charts/infermesh"
	// ReleaseName and Namespace are the release manifests/ is rendered for,
	// and what manifests/README.md tells helm users to install.
	ReleaseName = "infermesh"
	Namespace   = "infermesh-system"
)

// Options say what to render the chart for.
type Options struct {
	// ReleaseName and Namespace are the release's (.Release.Name,
	// .Release.Namespace); Namespace is where the namespaced objects go.
	ReleaseName string
	Namespace   string
	// Values override the chart's values.yaml, as helm's --values and --set do.
	Values map[string]any
}

// File is one rendered template.
type File struct {
	// Name is the template's file name, without templates/.
	Name string
	Data []byte
}

// Render loads the chart in chartDir, checks opts.Values against its
// values.schema.json and renders its YAML templates, as `helm install`
// would (a first install). Templates that render to nothing (all their
// objects switched off), NOTES.txt and partials are left out.
func Render(ctx context.Context, chartDir string, opts Options) ([]File, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load the chart %s: %w", chartDir, err)
	}
	values, err := util.ToRenderValuesWithSchemaValidation(ch, opts.Values, common.ReleaseOptions{
		Name: opts.ReleaseName, Namespace: opts.Namespace, Revision: 1, IsInstall: true,
	}, nil, false)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", chartDir, err)
	}
	rendered, err := engine.Engine{}.RenderWithContext(ctx, ch, values)
	if err != nil {
		return nil, fmt.Errorf("render the chart %s: %w", chartDir, err)
	}
	var files []File
	for name, text := range rendered {
		if path.Ext(name) != ".yaml" || strings.TrimSpace(text) == "" {
			continue
		}
		files = append(files, File{Name: path.Base(name), Data: []byte(text)})
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(files); i++ {
		if files[i].Name == files[i-1].Name {
			return nil, fmt.Errorf("chart %s: two templates named %s", chartDir, files[i].Name)
		}
	}
	return files, nil
}

// ManifestValues are the values manifests/ is rendered with: the chart's
// defaults, and the Namespace object, which helm install leaves to
// --create-namespace.
func ManifestValues() map[string]any {
	return map[string]any{"createNamespace": true}
}

// Generate renders the files of manifests/ from the chart in chartDir, each
// headed by a comment naming its template.
func Generate(ctx context.Context, chartDir string) ([]File, error) {
	files, err := Render(ctx, chartDir, Options{ReleaseName: ReleaseName, Namespace: Namespace, Values: ManifestValues()})
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		body := strings.TrimLeft(string(f.Data), "\n")
		if !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		files[i].Data = []byte(fmt.Sprintf("# Rendered by `make manifests` from the Helm chart %s\n"+
			"# (templates/%s): edit the chart, not this file.\n", ChartDir, f.Name) + body)
	}
	return files, nil
}
