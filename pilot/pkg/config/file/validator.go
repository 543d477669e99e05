// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package file

import "fmt"

// Validator checks one manifest at a time exactly as a Source checks each
// document of its folder: the embedded CRDs' structural schema, defaults
// and CEL rules for Gateway API and InferencePool kinds, the API server's
// validation for built-in kinds. It is for tests and tools that generate
// objects and need to know whether a cluster would accept them (the route
// fuzz test, for one). Safe for concurrent use.
type Validator struct {
	dec *decoder
}

// NewValidator builds a Validator over the embedded CRDs; an error is a
// build defect (broken embedded CRDs).
func NewValidator() (*Validator, error) { return NewChannelValidator(ChannelStandard) }

// NewChannelValidator is NewValidator with the Gateway API CRDs of channel.
func NewChannelValidator(channel Channel) (*Validator, error) {
	crds, err := crdsFor(channel)
	if err != nil {
		return nil, fmt.Errorf("file: embedded CRDs: %w", err)
	}
	return &Validator{dec: &decoder{crds: crds}}, nil
}

// Decode decodes one JSON document (a single object, not a List) and
// returns the typed object file mode would store, with the CRD's defaults
// applied (a *gatewayv1.HTTPRoute, ...), or the problems that make file
// mode refuse it. A kind file mode accepts but ignores returns nil and no
// problem.
func (v *Validator) Decode(doc []byte) (any, []Problem) {
	var res decodeResult
	v.dec.decodeJSON(docRef{file: "-", doc: 1, line: 1}, doc, &res)
	if len(res.problems) > 0 {
		return nil, res.problems
	}
	if len(res.objects) != 1 {
		return nil, nil
	}
	return res.objects[0].value, nil
}
