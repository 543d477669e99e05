// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import "time"

// Option changes how Start builds the cluster.
type Option func(*options)

type options struct {
	binaryDir     string
	controllers   []string
	apiServerArgs []string
	kcmArgs       []string
	crds          []string
	standardCRDs  bool
	scheduler     bool
	// serviceAccountAdmission keeps the ServiceAccount admission plugin on.
	serviceAccountAdmission bool
	startupTimeout          time.Duration
}

// defaultControllers are the kube-controller-manager controllers every Env runs.
var defaultControllers = []string{
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
	"garbage-collector-controller",
	"serviceaccount-controller",
}

func newOptions(opts []Option) options {
	o := options{
		controllers:    append([]string(nil), defaultControllers...),
		startupTimeout: 90 * time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithBinaryDir takes the binaries from dir instead of $KUBE_TEST_BINARIES or the
// cache folder of hack/k8s-test-binaries.sh.
func WithBinaryDir(dir string) Option {
	return func(o *options) { o.binaryDir = dir }
}

// WithControllers adds kube-controller-manager controllers to the default four,
// by their 1.37 names, which carry a "-controller" suffix (for example
// "namespace-controller"; see kube-controller-manager --help).
func WithControllers(names ...string) Option {
	return func(o *options) { o.controllers = append(o.controllers, names...) }
}

// WithAPIServerArgs appends flags to kube-apiserver's command line; a flag given
// here wins over the same flag set by Start, since the last one counts.
func WithAPIServerArgs(args ...string) Option {
	return func(o *options) { o.apiServerArgs = append(o.apiServerArgs, args...) }
}

// WithControllerManagerArgs appends flags to kube-controller-manager's
// command line, as WithAPIServerArgs does for the apiserver; for example
// "--kube-api-qps=1000" for a test that loads thousands of Services, whose
// EndpointSlices the controller would otherwise write at its default 20
// requests per second.
func WithControllerManagerArgs(args ...string) Option {
	return func(o *options) { o.kcmArgs = append(o.kcmArgs, args...) }
}

// WithCRDs installs the CustomResourceDefinitions in these YAML files (one or
// more documents each) during Start, and waits until they are established; see
// Env.ApplyCRDs.
func WithCRDs(paths ...string) Option {
	return func(o *options) { o.crds = append(o.crds, paths...) }
}

// WithStartupTimeout bounds how long Start and StartAPIServer wait for the
// cluster to become ready (default 90 s, generous for a loaded 2-core machine).
func WithStartupTimeout(d time.Duration) Option {
	return func(o *options) { o.startupTimeout = d }
}

// WithScheduler runs kube-scheduler beside the apiserver (see scheduler.go), so
// pods without a spec.nodeName are bound by the real scheduler. It binds only to
// a Node that has room for the pod and tolerated taints, and the apiserver's
// TaintNodesByCondition admission gives every new Node the taint
// node.kubernetes.io/not-ready:NoSchedule, which only kube-controller-manager's
// node-lifecycle-controller lifts, once the Node reports Ready. So a test that
// registers Nodes (or runs a node agent) also asks for
// WithControllers("node-lifecycle-controller"). The Node NodeName that Start
// creates keeps that taint and has no allocatable pods: the scheduler never
// picks it. Mind that the node-lifecycle-controller marks the pods of a Node
// that never reports status (such as NodeName) NotReady after its 60 s
// start-up grace period, which undoes MarkPodReady there.
func WithScheduler() Option {
	return func(o *options) { o.scheduler = true }
}

// WithServiceAccountAdmission keeps kube-apiserver's ServiceAccount admission
// plugin on, as on a real cluster: every pod gets a serviceAccountName and
// the kube-api-access projected volume (token, the kube-root-ca.crt
// ConfigMap's ca.crt, namespace), and creating a pod waits for its
// ServiceAccount to exist. Its ConfigMap needs the
// root-ca-certificate-publisher-controller (WithControllers).
func WithServiceAccountAdmission() Option {
	return func(o *options) { o.serviceAccountAdmission = true }
}
