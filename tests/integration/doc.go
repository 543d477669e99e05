// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Package integration holds infermesh's integration suites (build tag integ),
// which run against real components: a real kube-apiserver, etcd and
// kube-controller-manager, the real endpoint pickers, and traffic on loopback.
// Run them with `make integ`.
package integration
