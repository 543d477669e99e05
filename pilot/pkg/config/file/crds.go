// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import (
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// crdFS holds the CRD manifests that hack/update-crds.sh copies from the
// Gateway API and inference extension modules at the versions in go.mod.
//
//go:embed crds/*.yaml
var crdFS embed.FS

// ownCRDFS holds infermesh's own CRDs, copies of the ones the chart
// installs (manifests/charts/infermesh/crds; TestOwnCRDsMatchChart keeps
// them equal): a file-mode folder is checked as the cluster the chart set
// up would check it.
//
//go:embed owncrds/*.yaml
var ownCRDFS embed.FS

// crdVersion is what the API server builds for one served version of a CRD:
// the structural schema (pruning, defaulting), the OpenAPI validator and the
// CEL validator. Built on first use: compiling the CEL rules of every Gateway
// API kind costs tens of milliseconds that a folder without them should not pay.
type crdVersion struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	props      *apiextensions.JSONSchemaProps // internal form of openAPIV3Schema

	once       sync.Once
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator // nil when the schema has no x-kubernetes-validations
	err        error
}

// celPerCallLimit and celCostBudget are the API server's limits for CRD
// validation rules.
const (
	celPerCallLimit = celconfig.PerCallLimit
	celCostBudget   = celconfig.RuntimeCELCostBudget
)

func (v *crdVersion) build() error {
	v.once.Do(func() {
		s, err := structuralschema.NewStructural(v.props)
		if err != nil {
			v.err = fmt.Errorf("structural schema of %s: %w", v.gvk, err)
			return
		}
		// The API server serves defaults from a copy whose defaults are pruned
		// to the schema (customresource_handler.go); do the same.
		s = s.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(s); err != nil {
			v.err = fmt.Errorf("defaults of %s: %w", v.gvk, err)
			return
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(v.props)
		if err != nil {
			v.err = fmt.Errorf("schema validator of %s: %w", v.gvk, err)
			return
		}
		v.structural, v.validator = s, validator
		v.cel = cel.NewValidator(s, true, celPerCallLimit)
	})
	return v.err
}

// crdSchemas maps each served group/version/kind of the embedded CRDs to its
// schema.
type crdSchemas map[schema.GroupVersionKind]*crdVersion

// kindNames is the set of the kinds of c.
func (c crdSchemas) kindNames() map[string]bool {
	kinds := make(map[string]bool, len(c))
	for gvk := range c {
		kinds[gvk.Kind] = true
	}
	return kinds
}

var (
	embeddedOnce    sync.Once
	embeddedSchemas crdSchemas
	embeddedErr     error
)

// experimentalCRDFS holds the Gateway API experimental channel's versions of
// the kinds crds/ holds (the same file names), from the module version in
// go.mod; TestEmbeddedExperimentalCRDsMatchModule keeps them equal.
//
//go:embed crds-experimental/*.yaml
var experimentalCRDFS embed.FS

// Channel is the Gateway API release channel whose CRDs file mode checks
// Gateway API kinds against: what the cluster it stands for installed.
type Channel string

const (
	// ChannelStandard (the default): fields of the experimental channel,
	// such as Listener.filters, are unknown fields and refuse the object,
	// as a cluster with the standard CRDs would (with strict field
	// validation; without it the API server drops them silently).
	ChannelStandard Channel = "standard"
	// ChannelExperimental: the experimental channel's schemas and CEL
	// rules, a superset of the standard ones.
	ChannelExperimental Channel = "experimental"
)

var (
	experimentalOnce    sync.Once
	experimentalSchemas crdSchemas
	experimentalErr     error
)

// crdsFor are the schemas of channel: the embedded CRDs with, for the
// experimental channel, its Gateway API kinds in place of the standard
// ones.
func crdsFor(channel Channel) (crdSchemas, error) {
	switch channel {
	case "", ChannelStandard:
		return embeddedCRDs()
	case ChannelExperimental:
	default:
		return nil, fmt.Errorf("the Gateway API channel %q is neither %s nor %s", channel, ChannelStandard, ChannelExperimental)
	}
	experimentalOnce.Do(func() {
		var base, exp crdSchemas
		if base, experimentalErr = embeddedCRDs(); experimentalErr != nil {
			return
		}
		if exp, experimentalErr = parseCRDs(experimentalCRDFS, "crds-experimental"); experimentalErr != nil {
			return
		}
		experimentalSchemas = maps.Clone(base)
		maps.Copy(experimentalSchemas, exp)
	})
	return experimentalSchemas, experimentalErr
}

// embeddedCRDs parses the embedded CRDs once per process. An error means the
// embedded files are broken, which is a build defect.
func embeddedCRDs() (crdSchemas, error) {
	embeddedOnce.Do(func() {
		embeddedSchemas, embeddedErr = parseCRDs(crdFS, "crds")
		if embeddedErr != nil {
			return
		}
		var own crdSchemas
		if own, embeddedErr = parseCRDs(ownCRDFS, "owncrds"); embeddedErr == nil {
			maps.Copy(embeddedSchemas, own)
		}
	})
	return embeddedSchemas, embeddedErr
}

// parseCRDs reads every *.yaml in dir of fsys as one CustomResourceDefinition
// (apiextensions.k8s.io/v1) and indexes its served versions.
func parseCRDs(fsys fs.FS, dir string) (crdSchemas, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := crdSchemas{}
	for _, e := range entries {
		data, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", e.Name(), err)
		}
		for _, ver := range crd.Spec.Versions {
			if !ver.Served || ver.Schema == nil || ver.Schema.OpenAPIV3Schema == nil {
				continue
			}
			var internal apiextensions.CustomResourceValidation
			if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(
				ver.Schema, &internal, nil); err != nil {
				return nil, fmt.Errorf("CRD %s version %s: %w", e.Name(), ver.Name, err)
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}
			out[gvk] = &crdVersion{
				gvk:        gvk,
				namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
				props:      internal.OpenAPIV3Schema,
			}
		}
	}
	return out, nil
}
