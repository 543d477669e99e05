// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

// Package sharedstatus_test runs the StatusWriter (pkg/kube/writer) against a
// real cluster on an InferencePool whose status.parents list another
// controller writes at the same time: every controller's entries stay.
package sharedstatus_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	inferenceclient "sigs.k8s.io/gateway-api-inference-extension/client-go/clientset/versioned"

	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/kube/status"
	"github.com/infermesh/infermesh/pkg/kube/writer"
	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

const (
	ns       = "llm-namespace"
	poolName = "vllm-llama3-8b"
	poolKey  = ns + "/" + poolName

	ourController   = "istio.io/gateway-controller"
	otherController = "example.com/other-controller"
	ourAgent        = "infermesh-sharedstatus"
	otherAgent      = "other-controller"

	// versions is how many desired statuses of ours follow the first one;
	// otherWrites is how many successful writes the other controller makes.
	versions    = 30
	otherWrites = 60
	// otherMaxEntries bounds the other controller's entries (the CRD allows
	// 32 parents in all).
	otherMaxEntries = 10
	// otherMaxTries bounds one write of the other controller, conflicts
	// included.
	otherMaxTries = 50

	// waitBound bounds every wait for the writer to act.
	waitBound = 30 * time.Second
)

type (
	parent     = inferencev1.ParentStatus
	poolStatus = writer.DesiredStatus[parent]
)

// refKey identifies an entry's parent: group/kind/namespace/name.
func refKey(p *parent) string {
	g := ""
	if p.ParentRef.Group != nil {
		g = string(*p.ParentRef.Group)
	}
	return g + "/" + string(p.ParentRef.Kind) + "/" + string(p.ParentRef.Namespace) + "/" + string(p.ParentRef.Name)
}

var poolParents = status.ParentAccess[parent]{
	Controller: func(p *parent) string { return string(p.ControllerName) },
	Key:        refKey,
	Conditions: func(p *parent) *[]metav1.Condition { return &p.Conditions },
}

// seedPool is the seed's InferencePool.
func seedPool() *inferencev1.InferencePool {
	return seed.InferencePool()
}

// ref is a parentRef to a Gateway in the form the API server stores it:
// group and kind defaulted.
func ref(namespace, name string) inferencev1.ParentReference {
	g := inferencev1.Group("gateway.networking.k8s.io")
	return inferencev1.ParentReference{Group: &g, Kind: "Gateway", Namespace: inferencev1.Namespace(namespace), Name: inferencev1.ObjectName(name)}
}

// t0 anchors the lastTransitionTimes of our conditions.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cond is one of our conditions. Its lastTransitionTime is a function of
// (parent, type, status): the same status of the same condition always
// carries the same time, so the merge's keeping of the live time while the
// status is unchanged gives exactly the desired value, and the live entries
// can be compared with the desired ones exactly.
func cond(parentKey, typ string, s metav1.ConditionStatus, reason, message string, generation int64) metav1.Condition {
	h := fnv.New32a()
	h.Write([]byte(parentKey + "|" + typ + "|" + string(s)))
	return metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: generation,
		LastTransitionTime: metav1.NewTime(t0.Add(time.Duration(h.Sum32()%100000) * time.Second)),
	}
}

// ourGateways are the parents our desired entries choose from; two of them
// are also parents of the other controller's entries (same parentRef,
// different controllerName), and one is in another namespace.
var ourGateways = []inferencev1.ParentReference{
	ref("", "gw-0"), ref("", "gw-1"), ref("", "gw-2"), ref("", "gw-3"), ref("gateways", "gw-0"), ref("gateways", "edge"),
}

// desiredVersion returns our entries of version v, in random order (the
// writer sorts them); nil is "nothing desired" of another kind than a
// deleted desired status.
func desiredVersion(rng *rand.Rand, v int, generation int64) []parent {
	var out []parent
	for _, r := range ourGateways {
		if rng.IntN(3) == 0 {
			continue
		}
		p := parent{ParentRef: r, ControllerName: ourController}
		k := refKey(&p)
		acc, res := metav1.ConditionTrue, metav1.ConditionTrue
		accReason, resReason := "Accepted", "ResolvedRefs"
		if rng.IntN(2) == 0 {
			acc, accReason = metav1.ConditionFalse, "NotSupportedByParent"
		}
		if rng.IntN(3) == 0 {
			res, resReason = metav1.ConditionFalse, "InvalidExtensionRef"
		}
		msg := fmt.Sprintf("version %d", v)
		p.Conditions = []metav1.Condition{
			cond(k, "Accepted", acc, accReason, msg, generation),
			cond(k, "ResolvedRefs", res, resReason, msg, generation),
		}
		out = append(out, p)
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// only returns the entries of controller, in list order.
func only(ps []parent, controller string) []parent {
	var out []parent
	for _, p := range ps {
		if string(p.ControllerName) == controller {
			out = append(out, p)
		}
	}
	return out
}

// sorted returns ps sorted by parent key, the order our writer writes.
func sorted(ps []parent) []parent {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b parent) int { return strings.Compare(refKey(&a), refKey(&b)) })
	return out
}

func same(a, b []parent) bool {
	return (len(a) == 0 && len(b) == 0) || equality.Semantic.DeepEqual(a, b)
}

// observed is one state of the pool's status.parents seen by the watch.
type observed struct {
	rv      string
	parents []parent
}

// watchPool records every state of the pool after rv until ctx ends.
func watchPool(ctx context.Context, t *testing.T, c inferenceclient.Interface, rv string) func() []observed {
	var (
		mu     sync.Mutex
		states []observed
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := c.InferenceV1().InferencePools(ns).Watch(ctx, metav1.ListOptions{
				FieldSelector: "metadata.name=" + poolName, ResourceVersion: rv,
			})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("watch: %v", err)
				}
				return
			}
			for e := range w.ResultChan() {
				switch e.Type {
				case watch.Added, watch.Modified:
					p := e.Object.(*inferencev1.InferencePool)
					rv = p.ResourceVersion
					mu.Lock()
					states = append(states, observed{rv: rv, parents: p.Status.Parents})
					mu.Unlock()
				case watch.Error:
					// The client reports its own cancellation as an error event.
					if ctx.Err() == nil {
						t.Errorf("watch error: %v", apierrors.FromObject(e.Object))
					}
				}
			}
			w.Stop()
		}
	}()
	return func() []observed {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return states
	}
}

// otherResult is what the other controller saw and did.
type otherResult struct {
	// written[i] is its entries as the server stored them after its i-th
	// successful write; written[0] is none.
	written   [][]parent
	conflicts int
	tries     int
}

// runOtherController plays example.com/other-controller: otherWrites plain
// read-modify-write UpdateStatus calls, each adding an entry of its own (until
// it has otherMaxEntries) or updating one in place, keeping every other entry
// as it is and retrying on 409. Each read must contain its entries exactly as
// its last successful write stored them; a read missing one (or with one
// changed) is an error: an entry was lost in between.
func runOtherController(ctx context.Context, t *testing.T, c inferenceclient.Interface, rng *rand.Rand) otherResult {
	pools := c.InferenceV1().InferencePools(ns)
	res := otherResult{written: [][]parent{nil}}
	names := []string{"gw-0", "gw-1", "other-a", "other-b", "other-c", "other-d", "other-e", "other-f", "other-g", "other-h"}
	for i := 1; i <= otherWrites; i++ {
		time.Sleep(time.Duration(10+rng.IntN(50)) * time.Millisecond)
		// What this write does, fixed before the first try.
		addNew := false
		var which int
		ok := false
		for try := 0; try < otherMaxTries && ctx.Err() == nil; try++ {
			res.tries++
			live, err := pools.Get(ctx, poolName, metav1.GetOptions{})
			if err != nil {
				t.Errorf("other controller: get: %v", err)
				return res
			}
			mine := only(live.Status.Parents, otherController)
			if last := res.written[len(res.written)-1]; !same(mine, last) {
				t.Errorf("other controller, write %d try %d: read (rv %s) finds its entries changed since its last write (an entry was lost or altered):\n have %s\n want %s",
					i, try, live.ResourceVersion, show(mine), show(last))
				return res
			}
			if try == 0 {
				addNew = len(mine) < otherMaxEntries && rng.IntN(3) != 0
				if len(mine) > 0 {
					which = rng.IntN(len(mine))
				}
			}
			next := live.DeepCopy()
			msg := fmt.Sprintf("write %d", i)
			if addNew || len(mine) == 0 {
				name := names[len(mine)]
				p := parent{ParentRef: ref("", name), ControllerName: otherController, Conditions: []metav1.Condition{{
					Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: msg,
					ObservedGeneration: live.Generation, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
				}}}
				next.Status.Parents = append(next.Status.Parents, p) // appended after everyone's
			} else {
				// Update its which-th entry in place: flip Accepted.
				n := -1
				for j := range next.Status.Parents {
					if string(next.Status.Parents[j].ControllerName) != otherController {
						continue
					}
					if n++; n == which {
						c := &next.Status.Parents[j].Conditions[0]
						if c.Status == metav1.ConditionTrue {
							c.Status, c.Reason = metav1.ConditionFalse, "NotSupportedByParent"
						} else {
							c.Status, c.Reason = metav1.ConditionTrue, "Accepted"
						}
						c.Message = msg
						c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
					}
				}
			}
			stored, err := pools.UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: otherController})
			if apierrors.IsConflict(err) {
				res.conflicts++
				continue
			}
			if err != nil {
				t.Errorf("other controller: write %d: %v", i, err)
				return res
			}
			res.written = append(res.written, only(stored.Status.Parents, otherController))
			ok = true
			break
		}
		if !ok {
			if ctx.Err() == nil {
				t.Errorf("other controller: write %d: no success in %d tries", i, otherMaxTries)
			}
			return res
		}
	}
	return res
}

func show(ps []parent) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "[%s %s", p.ControllerName, refKey(&p))
		for _, c := range p.Conditions {
			fmt.Fprintf(&b, " %s=%s(%s,%q,g%d,%s)", c.Type, c.Status, c.Reason, c.Message, c.ObservedGeneration, c.LastTransitionTime.UTC().Format(time.RFC3339))
		}
		b.WriteString("] ")
	}
	return b.String()
}

// startWriter runs a StatusWriter for InferencePool status.parents with
// controllerName controller (also its field manager), always leading, with
// user agent agent, until the test ends.
func startWriter(t *testing.T, env *kubeenv.Env, agent, controller string, desired krt.Collection[poolStatus]) {
	t.Helper()
	cfg := env.RESTConfig()
	cfg.UserAgent = agent
	client, err := kube.NewFromRESTConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api := client.Inference().InferenceV1()
	w, err := writer.NewStatusWriter(writer.StatusConfig[*inferencev1.InferencePool, parent]{
		Name:       agent,
		Desired:    desired,
		Live:       client.InferencePools(),
		Controller: controller,
		Access:     poolParents,
		Get: func(ctx context.Context, ns, name string) (*inferencev1.InferencePool, error) {
			return api.InferencePools(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Parents: func(p *inferencev1.InferencePool) []parent { return p.Status.Parents },
		WithParents: func(p *inferencev1.InferencePool, ps []parent) *inferencev1.InferencePool {
			p = p.DeepCopy()
			p.Status.Parents = ps
			return p
		},
		UpdateStatus: func(ctx context.Context, p *inferencev1.InferencePool) error {
			_, err := api.InferencePools(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: controller})
			return err
		},
		IsLeader: func() bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	done := make(chan struct{})
	client.Start(stop)
	go func() {
		defer close(done)
		w.Run(ctx)
		close(stop)
		client.Shutdown()
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// statusWrites counts our agent's status updates of the pool in the audit
// log, by response code.
func statusWrites(t *testing.T, env *kubeenv.Env, agent string) map[int]int {
	t.Helper()
	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	codes := map[int]int{}
	for _, e := range events {
		if e.Stage == "ResponseComplete" && e.Verb == "update" && e.Resource == "inferencepools" &&
			e.Subresource == "status" && e.Namespace == ns && e.Name == poolName && e.UserAgent == agent {
			codes[e.Code]++
		}
	}
	return codes
}

// TestSharedStatusKeepsEveryonesEntries: our writes of a shared
// status.parents list keep every other controller's entries.
func TestSharedStatusKeepsEveryonesEntries(t *testing.T) {
	start := time.Now()
	env := kubeenv.Start(t, kubeenv.WithStandardCRDs())
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(env.RESTConfig())
	if _, err := admin.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inf := inferenceclient.NewForConfigOrDie(env.RESTConfig())
	pool, err := inf.InferenceV1().InferencePools(ns).Create(ctx, seedPool(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	otherCfg := env.RESTConfig()
	otherCfg.UserAgent = otherAgent
	otherClient := inferenceclient.NewForConfigOrDie(otherCfg)

	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	otherRng := rand.New(rand.NewPCG(seed, 2))

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	states := watchPool(watchCtx, t, inf, pool.ResourceVersion)

	// history[v] is our entries as desired at version v, sorted by key (nil:
	// none, or the desired status deleted);
	// history[0] is the empty list before our first write.
	first := desiredVersion(rng, 0, pool.Generation)
	history := [][]parent{nil, sorted(first)}
	desired := krt.NewStaticCollection[poolStatus](nil, []poolStatus{{Namespace: ns, Name: poolName, Parents: first}},
		krt.WithStop(ctx.Done()))
	publish := func(d []parent, deleted bool) {
		history = append(history, sorted(d))
		if deleted {
			desired.DeleteObject(poolKey)
		} else {
			desired.UpdateObject(poolStatus{Namespace: ns, Name: poolName, Parents: d})
		}
	}
	startWriter(t, env, ourAgent, ourController, desired)

	var other otherResult
	otherDone := make(chan struct{})
	go func() {
		defer close(otherDone)
		other = runOtherController(ctx, t, otherClient, otherRng)
	}()
	deletes, empties := 0, 0
	for v := 1; v <= versions; v++ {
		time.Sleep(time.Duration(20+rng.IntN(100)) * time.Millisecond)
		switch {
		case v < versions && v%10 == 7: // desired status gone: our entries must go
			deletes++
			publish(nil, true)
		default:
			d := desiredVersion(rng, v, pool.Generation)
			if v == versions && len(d) == 0 {
				d = desiredVersion(rng, v, pool.Generation) // end with some entries, most likely
			}
			if len(d) == 0 {
				empties++
			}
			publish(d, false)
		}
	}
	<-otherDone
	if t.Failed() {
		t.FailNow()
	}
	latest := history[len(history)-1]
	theirs := other.written[len(other.written)-1]

	var live *inferencev1.InferencePool
	deadline := time.Now().Add(waitBound)
	for {
		live, err = inf.InferenceV1().InferencePools(ns).Get(ctx, poolName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if same(sorted(only(live.Status.Parents, ourController)), latest) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for our entries to equal the latest desired:\n have %s\n want %s",
				waitBound, show(only(live.Status.Parents, ourController)), show(latest))
		}
		time.Sleep(50 * time.Millisecond)
	}
	converged := time.Since(start)

	// Final state: theirs exactly as their last write stored them, ours
	// exactly the latest desired, and nobody else's.
	if got := only(live.Status.Parents, otherController); !same(got, theirs) {
		t.Errorf("other controller's entries after both finished:\n have %s\n want %s", show(got), show(theirs))
	}
	if n := len(only(live.Status.Parents, ourController)) + len(only(live.Status.Parents, otherController)); n != len(live.Status.Parents) {
		t.Errorf("live parents has %d entries, %d of them ours or theirs: %s", len(live.Status.Parents), n, show(live.Status.Parents))
	}
	if len(theirs) == 0 || len(latest) == 0 {
		t.Logf("note: final entries: %d theirs, %d ours", len(theirs), len(latest))
	}

	// No write loop: once converged, nothing more is written by us.
	time.Sleep(time.Second)
	before := statusWrites(t, env, ourAgent)
	time.Sleep(2 * time.Second)
	after := statusWrites(t, env, ourAgent)
	if after[200] != before[200] {
		t.Errorf("our writer kept writing after convergence: %d -> %d successful status writes", before[200], after[200])
	}

	// Every state the pool went through: our entries are always one of our
	// desired versions and theirs one of their writes, each in order. A state
	// where either is anything else lost (or altered) an entry.
	stopWatch()
	obs := states()
	ourAt, theirAt, reorders := 0, 0, 0
	var prev []parent
	for i, s := range obs {
		// Our writer keeps entries in place, so compare ours as a set (sorted).
		o, th := sorted(only(s.parents, ourController)), only(s.parents, otherController)
		j := ourAt
		for j < len(history) && !same(o, history[j]) {
			j++
		}
		if j == len(history) {
			t.Errorf("state %d (rv %s): our entries are none of our desired versions from %d on (lost or stale): %s", i, s.rv, ourAt, show(o))
		} else {
			ourAt = j
		}
		k := theirAt
		for k < len(other.written) && !same(th, other.written[k]) {
			k++
		}
		if k == len(other.written) {
			t.Errorf("state %d (rv %s): the other controller's entries are none of its writes from %d on (lost or altered): %s", i, s.rv, theirAt, show(th))
		} else {
			theirAt = k
		}
		if i > 0 && same(o, sorted(only(prev, ourController))) && same(th, only(prev, otherController)) {
			reorders++ // a write that changed only the order of the list
		}
		prev = s.parents
	}
	if len(obs) == 0 {
		t.Error("the watch saw no state of the pool")
	}
	if theirAt != len(other.written)-1 {
		t.Errorf("the watch's last state has the other controller's write %d, want %d", theirAt, len(other.written)-1)
	}

	ours := statusWrites(t, env, ourAgent)
	theirsAudit := statusWrites(t, env, otherAgent)
	t.Logf("desired versions: %d (%d deletes of the desired status, %d empty); other controller: %d successful writes in %d tries, %d conflicts (409) seen by it",
		len(history)-1, deletes, empties, len(other.written)-1, other.tries, other.conflicts)
	t.Logf("audit log, status updates by response code: ours %v, other controller %v", ours, theirsAudit)
	t.Logf("watch: %d states; %d of them changed only the order of the list", len(obs), reorders)
	if reorders > 0 {
		// MergeParents keeps entries in place, so no write may only reorder.
		t.Errorf("%d writes changed only the order of status.parents", reorders)
	}
	t.Logf("converged %v after start (cluster start included)", converged.Round(time.Millisecond))
	if other.conflicts+ours[409] == 0 {
		t.Log("no conflict (409) occurred on either side in this run")
	}
	if theirsAudit[409] != other.conflicts {
		t.Errorf("audit log has %d conflicts of the other controller, it counted %d", theirsAudit[409], other.conflicts)
	}
}
