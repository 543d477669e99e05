// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import "slices"

// Test types shared by this package's tests.

type pod struct {
	Name, Namespace string
	Labels          map[string]string
	IP              string
}

func (p pod) ResourceName() string         { return p.Namespace + "/" + p.Name }
func (p pod) GetNamespace() string         { return p.Namespace }
func (p pod) GetLabels() map[string]string { return p.Labels }

type service struct {
	Name, Namespace string
	Selector        map[string]string
}

func (s service) ResourceName() string                { return s.Namespace + "/" + s.Name }
func (s service) GetNamespace() string                { return s.Namespace }
func (s service) GetLabelSelector() map[string]string { return s.Selector }

type endpoints struct {
	Name, Namespace string
	IPs             []string
}

func (e endpoints) ResourceName() string { return e.Namespace + "/" + e.Name }
func (e endpoints) Equals(o endpoints) bool {
	return e.Name == o.Name && e.Namespace == o.Namespace && slices.Equal(e.IPs, o.IPs)
}

func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
