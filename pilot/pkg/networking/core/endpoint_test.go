// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"testing"
)

func TestClusterLoadAssignmentSortedDeduplicated(t *testing.T) {
	in := []Endpoint{{Address: "10.0.0.10", Port: 8000}, {Address: "10.0.0.9", Port: 8001}, {Address: "10.0.0.9", Port: 8000}, {Address: "fd00::1", Port: 80}, {Address: "10.0.0.10", Port: 8000}}
	cla := BuildClusterLoadAssignment("c", in)
	var got []string
	for _, e := range cla.Endpoints[0].LbEndpoints {
		sa := e.GetEndpoint().GetAddress().GetSocketAddress()
		got = append(got, fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()))
	}
	want := "[10.0.0.9:8000 10.0.0.9:8001 10.0.0.10:8000 fd00::1:80]"
	if fmt.Sprint(got) != want {
		t.Errorf("endpoints %v, want %s", got, want)
	}
	if in[0].Address != "10.0.0.10" {
		t.Error("input was modified")
	}
	if err := cla.ValidateAll(); err != nil {
		t.Error(err)
	}
}

func TestEveryEDSClusterGetsAnAssignment(t *testing.T) {
	// No endpoints at all: every cluster still gets an (empty) assignment.
	res := build(t, seedGateway(), Inputs{}, inferenceOn)
	if len(res.Endpoints) != len(res.Clusters) {
		t.Fatalf("%d assignments for %d clusters", len(res.Endpoints), len(res.Clusters))
	}
	for _, e := range res.Endpoints {
		if len(e.Endpoints) != 0 {
			t.Errorf("%s has endpoints", e.ClusterName)
		}
	}
}
