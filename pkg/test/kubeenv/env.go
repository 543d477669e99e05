// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Client rate limits of Env.RESTConfig, far above client-go's defaults of 5/10.
const (
	ClientQPS   = 1000
	ClientBurst = 2000
)

// stopGrace is how long cleanup lets each process shut down after SIGTERM
// before it sends SIGKILL.
const stopGrace = 5 * time.Second

// Env is one running control plane. Its methods are for the test goroutine.
type Env struct {
	// Kubeconfig is the path of a kubeconfig file for AdminUser (system:masters).
	Kubeconfig string
	// AuditLog is the path of kube-apiserver's JSON-lines audit log; see AuditEvents.
	AuditLog string
	// APIServerReadyAfter is how long after Start began kube-apiserver's /readyz
	// first answered 200. The rest of Start's time (controller-manager, Node,
	// CRDs) is the harness's overhead over the apiserver's own readiness.
	APIServerReadyAfter time.Duration

	t     testing.TB
	opts  options
	files files
	creds credentials

	etcd, apiServer, controllerManager *process
	scheduler                          *process // nil without WithScheduler
	schedulerPort                      int
}

// Start starts etcd, kube-apiserver and kube-controller-manager (and
// kube-scheduler with WithScheduler), creates the Node NodeName, installs the CRDs of WithCRDs and WithStandardCRDs, and
// returns once the apiserver is ready and the controllers are running (bounded
// by WithStartupTimeout). Its
// t.Cleanup stops them all in reverse order, and logs their output if the test
// failed. Start fails the test (t.Fatal) when the binaries are missing, naming
// hack/k8s-test-binaries.sh, or when any step fails, with the process's log tail.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	began := time.Now()
	o := newOptions(opts)
	names := binaryNames
	if o.scheduler {
		names = append(append([]string(nil), binaryNames...), schedulerBinary)
	}
	bin, err := findBinaries(o.binaryDir, names, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	ports, err := freePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	apiPort, etcdPort, peerPort := ports[0], ports[1], ports[2]

	e := &Env{t: t, opts: o, files: newFiles(t.TempDir())}
	e.Kubeconfig, e.AuditLog = e.files.adminConfig, e.files.auditLog
	e.creds, err = e.files.write(fmt.Sprintf("https://127.0.0.1:%d", apiPort))
	if err != nil {
		t.Fatal(err)
	}
	e.etcd = newEtcd(bin, e.files, etcdPort, peerPort)
	e.apiServer = newAPIServer(bin, e.files, apiPort, etcdPort, o.apiServerArgs, o.serviceAccountAdmission)
	e.controllerManager = newControllerManager(bin, e.files, o.controllers, o.kcmArgs)
	if o.scheduler {
		e.schedulerPort = ports[3]
		e.scheduler = newScheduler(bin, e.files, e.schedulerPort)
	}
	t.Cleanup(e.cleanup) // before the first process starts, so none outlives a failed Start

	ctx, cancel := context.WithTimeout(context.Background(), o.startupTimeout)
	defer cancel()
	apiReady, err := e.boot(ctx, began, etcdPort)
	if err != nil {
		t.Fatal(err)
	}
	e.APIServerReadyAfter = apiReady
	t.Logf("kubeenv: cluster ready in %v (kube-apiserver ready after %v) at %s",
		time.Since(began).Round(time.Millisecond), apiReady.Round(time.Millisecond), e.creds.host)
	return e
}

// boot starts etcd, kube-apiserver and kube-controller-manager in turn, creates
// the Node, and returns how long after began the apiserver became ready, once
// the controllers (and the scheduler, if asked for) run.
func (e *Env) boot(ctx context.Context, began time.Time, etcdPort int) (time.Duration, error) {
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	if err := e.etcd.start(); err != nil {
		return 0, err
	}
	if err := waitFor(ctx, e.etcd, "etcd /health", func(ctx context.Context) bool { return etcdHealthy(ctx, etcdURL) }); err != nil {
		return 0, err
	}
	if err := e.apiServer.start(); err != nil {
		return 0, err
	}
	if err := waitFor(ctx, e.apiServer, "kube-apiserver /readyz", readyzClient(e.creds)); err != nil {
		return 0, err
	}
	apiReady := time.Since(began)
	// CRDs go in before kube-controller-manager starts, as in a real cluster
	// where they are installed long before: its garbage collector then
	// watches the custom kinds from the start (it discovers new ones only
	// every 30 s, and owner references to a kind it cannot map wait for that).
	if len(e.opts.crds) > 0 {
		e.ApplyCRDs(e.opts.crds...)
	}
	if e.opts.standardCRDs {
		e.ApplyStandardCRDs()
	}
	// Only now: kube-controller-manager gives up if the apiserver is not healthy
	// within 10 s of its start, which a loaded machine can exceed.
	if err := e.controllerManager.start(); err != nil {
		return 0, err
	}
	client, err := kubernetes.NewForConfig(e.RESTConfig())
	if err != nil {
		return 0, fmt.Errorf("kubeenv: %w", err)
	}
	if err := createNode(ctx, client); err != nil {
		return 0, err
	}
	// The serviceaccount controller creating default/default shows that the
	// controller-manager is up and its informers have synced.
	err = waitFor(ctx, e.controllerManager, "kube-controller-manager (the default ServiceAccount)", func(ctx context.Context) bool {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	if err != nil || e.scheduler == nil {
		return apiReady, err
	}
	return apiReady, e.startScheduler(ctx)
}

// startScheduler starts kube-scheduler and waits until its /readyz answers,
// which includes its informers' first sync.
func (e *Env) startScheduler(ctx context.Context) error {
	if err := e.scheduler.start(); err != nil {
		return err
	}
	return waitFor(ctx, e.scheduler, "kube-scheduler /readyz", schedulerReady(e.schedulerPort))
}

// processes returns the running parts in the order they stop: the scheduler
// (if any), kube-controller-manager, kube-apiserver, etcd.
func (e *Env) processes() []*process {
	ps := []*process{e.controllerManager, e.apiServer, e.etcd}
	if e.scheduler != nil {
		ps = append([]*process{e.scheduler}, ps...)
	}
	return ps
}

// KubeletClientCA is the PEM certificate kube-apiserver presents to
// kubelets (--kubelet-client-certificate; self-signed, so its own CA): what
// a node agent's kubelet API (pkg/test/node Config.KubeletClientCA)
// trusts, so that pods/log works through the API server.
func (e *Env) KubeletClientCA() []byte { return e.creds.kubeletClientPEM }

// RESTConfig returns a new client config for AdminUser (system:masters), with
// QPS ClientQPS and burst ClientBurst. The caller may change it.
func (e *Env) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            e.creds.host,
		BearerToken:     e.creds.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.creds.caPEM},
		QPS:             ClientQPS,
		Burst:           ClientBurst,
		UserAgent:       "kubeenv-test",
	}
}

// createNode creates the Node NodeName that pods are bound to; the
// EndpointSlice controller skips pods whose node it cannot find.
func createNode(ctx context.Context, client kubernetes.Interface) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   NodeName,
		Labels: map[string]string{corev1.LabelHostname: NodeName},
	}}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: KubeletFieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubeenv: create node: %w", err)
	}
	return nil
}

// Stop stops kube-scheduler (with WithScheduler), kube-controller-manager,
// kube-apiserver and etcd now, in that order (SIGTERM, then SIGKILL after 5 s), and returns once all have exited.
// The cluster is gone for good: do not call StartAPIServer afterwards. Start's
// t.Cleanup then stops nothing more, but still attaches the logs if the test
// failed. Calling Stop again does nothing. A process that survives SIGKILL is
// reported with t.Error.
func (e *Env) Stop() {
	e.t.Helper()
	for _, p := range e.processes() {
		if err := p.stop(stopGrace); err != nil {
			e.t.Error(err)
		}
	}
}

// cleanup stops the processes as Stop does, unless Stop already did, and
// attaches their logs to the test output if the test failed.
func (e *Env) cleanup() {
	e.Stop()
	if !e.t.Failed() {
		return
	}
	for _, p := range slices.Backward(e.processes()) {
		e.t.Logf("kubeenv: %s log (%s):\n%s", p.name, p.logPath, p.logTail(256<<10))
	}
}
