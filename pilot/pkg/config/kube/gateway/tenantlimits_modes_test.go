// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/features"
	kubelib "github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/kube/krt"
	"github.com/infermesh/infermesh/pkg/test/poll"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// The per-namespace limits are read from the flags the same way in a
// cluster (NewController over informers) and in file mode (NewOffline over
// static collections): with PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE=5, team-a
// (three routes of two regexes) loses its newest route with
// Accepted=False/TooManyMatches in both, team-b (three of one) none, and
// every route's status entries are the same in both modes.
func TestClusterAndFileModeRefuseTheSameRoutes(t *testing.T) {
	f := features.Defaults()
	f.MaxRegexMatchesPerNamespace = 5
	grant := &gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: seed.Namespace, Name: "from-teams"},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "team-a"},
				{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "team-b"}},
			To: []gwv1.ReferenceGrantTo{{Kind: "Service"}},
		},
	}
	var routes []*gwv1.HTTPRoute
	for i := range 3 {
		routes = append(routes, limitRoute("team-a", i, 2, i), limitRoute("team-b", i, 1, 10+i))
	}
	stop := krt.WithStop(t.Context().Done())

	// Cluster mode: the objects through a (fake) API server's informers.
	objs := append(kubelib.OptionalCRDs(), seed.GatewayClassObject(), seed.Gateway(), seed.EPPService(), grant)
	for _, r := range routes {
		objs = append(objs, r.DeepCopy())
	}
	client := kubelib.NewFake(objs...)
	cluster, err := NewController(ControllerConfig{Client: client, Features: f, IsLeader: func() bool { return true },
		Krt: []krt.CollectionOption{stop}})
	if err != nil {
		t.Fatal(err)
	}
	client.Start(t.Context().Done())
	t.Cleanup(client.Shutdown)

	// File mode: the same objects in static collections, as the file
	// source hands them over.
	httpRoutes := make([]*gwv1.HTTPRoute, len(routes))
	for i, r := range routes {
		httpRoutes[i] = r.DeepCopy()
	}
	file := NewOffline(Inputs{
		GatewayClasses:     krt.NewStaticCollection(nil, []*gwv1.GatewayClass{seed.GatewayClassObject()}, stop),
		Gateways:           krt.NewStaticCollection(nil, []*gwv1.Gateway{seed.Gateway()}, stop),
		HTTPRoutes:         krt.NewStaticCollection(nil, httpRoutes, stop),
		GRPCRoutes:         krt.NewStaticCollection[*gwv1.GRPCRoute](nil, nil, stop),
		ReferenceGrants:    krt.NewStaticCollection(nil, []*gwv1.ReferenceGrant{grant}, stop),
		Namespaces:         krt.NewStaticCollection[*corev1.Namespace](nil, nil, stop),
		Services:           krt.NewStaticCollection(nil, []*corev1.Service{seed.EPPService()}, stop),
		InferencePools:     krt.NewStaticCollection[*inferencev1.InferencePool](nil, nil, stop),
		ConfigMaps:         krt.NewStaticCollection[*corev1.ConfigMap](nil, nil, stop),
		Secrets:            krt.NewStaticCollection[*corev1.Secret](nil, nil, stop),
		BackendTLSPolicies: krt.NewStaticCollection[*gwv1.BackendTLSPolicy](nil, nil, stop),
		DestinationRules:   krt.NewStaticCollection[kubelib.DestinationRule](nil, nil, stop),
		ListenerSets:       krt.NewStaticCollection[*gwv1.ListenerSet](nil, nil, stop),
	}, f, []krt.CollectionOption{stop})

	accepted := func(c *Controller, ns, name string) string {
		s := c.HTTPRouteStatuses.GetKey(ns + "/" + name)
		if s == nil || len(s.Parents) == 0 {
			return "none"
		}
		cond := meta.FindStatusCondition(s.Parents[0].Conditions, string(gwv1.RouteConditionAccepted))
		if cond == nil {
			return "no Accepted"
		}
		return string(cond.Status) + "/" + cond.Reason
	}
	want := func(ns string, i int) string {
		if ns == "team-a" && i == 2 {
			return "False/TooManyMatches"
		}
		return "True/Accepted"
	}
	for _, mode := range []struct {
		name string
		c    *Controller
	}{{"cluster", cluster}, {"file", file}} {
		describe := func() string {
			var b strings.Builder
			for _, ns := range []string{"team-a", "team-b"} {
				for i := range 3 {
					fmt.Fprintf(&b, "%s-%d %s; ", ns, i, accepted(mode.c, ns, fmt.Sprintf("%s-%d", ns, i)))
				}
			}
			return b.String()
		}
		poll.UntilOr(t, 30*time.Second, mode.name+" mode: team-a-2 refused, every other route accepted", func() bool {
			for _, ns := range []string{"team-a", "team-b"} {
				for i := range 3 {
					if accepted(mode.c, ns, fmt.Sprintf("%s-%d", ns, i)) != want(ns, i) {
						return false
					}
				}
			}
			return true
		}, describe)
	}
	for _, r := range routes {
		key := r.Namespace + "/" + r.Name
		cs, fs := cluster.HTTPRouteStatuses.GetKey(key), file.HTTPRouteStatuses.GetKey(key)
		if d := cmp.Diff(cs, fs); d != "" {
			t.Errorf("%s: status in cluster mode and file mode differ (-cluster +file):\n%s", key, d)
		}
	}
	if s := file.HTTPRouteStatuses.GetKey("team-a/team-a-2"); s != nil {
		msg := meta.FindStatusCondition(s.Parents[0].Conditions, string(gwv1.RouteConditionAccepted)).Message
		if !strings.Contains(msg, "PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE") || !strings.Contains(msg, "at most 5") {
			t.Errorf("team-a-2's Accepted message names neither the flag nor the limit: %q", msg)
		}
	}
}
