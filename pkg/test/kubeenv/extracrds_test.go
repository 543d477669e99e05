// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import "testing"

func TestExtraCRDsHoldOnlyTheirOneCRD(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func() (string, error)
		want string
	}{
		{"InferenceObjectiveCRD", InferenceObjectiveCRD, "inferenceobjectives.inference.networking.x-k8s.io"},
		{"DestinationRuleCRD", DestinationRuleCRD, "destinationrules.networking.istio.io"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, err := tc.path()
			if err != nil {
				t.Fatal(err)
			}
			crds, skipped, err := readCRDs(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(crds) != 1 || len(skipped) != 0 || crds[0].GetName() != tc.want {
				var names []string
				for _, c := range crds {
					names = append(names, c.GetName())
				}
				t.Fatalf("%s: CRDs %v, other documents %v; want only %s", path, names, skipped, tc.want)
			}
		})
	}
}
