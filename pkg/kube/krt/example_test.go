// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt_test

import (
	"fmt"
	"strings"

	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// examplePod and exampleService are the inputs of Example: a pod runs one
// app at one address; a Service selects the pods of one app.
type examplePod struct {
	Name, App, IP string
}

func (p examplePod) ResourceName() string { return p.Name }

type exampleService struct {
	Name, App string
}

func (s exampleService) ResourceName() string { return s.Name }

// exampleEndpoints is the derived output: a Service's pod addresses.
type exampleEndpoints struct {
	Service string
	IPs     []string
}

func (e exampleEndpoints) ResourceName() string { return e.Service }

// Example derives each Service's endpoints from two static collections:
// the transformation reads pods only through krt.Fetch, narrowed by an
// Index, so a pod change reruns only the Services of that pod's app.
func Example() {
	stop := make(chan struct{})
	defer close(stop)

	pods := krt.NewStaticCollection(nil, []examplePod{
		{Name: "reviews-1", App: "reviews", IP: "10.0.0.1"},
		{Name: "ratings-1", App: "ratings", IP: "10.0.0.2"},
	}, krt.WithName("Pods"), krt.WithStop(stop))
	services := krt.NewStaticCollection(nil, []exampleService{
		{Name: "reviews", App: "reviews"},
		{Name: "ratings", App: "ratings"},
	}, krt.WithName("Services"), krt.WithStop(stop))

	// The index files each pod under its app.
	podsByApp := krt.NewIndex(pods, "app", func(p examplePod) []string { return []string{p.App} })

	// The derived collection: one exampleEndpoints per Service. Fetch
	// records the read (pods, filtered by the index key), so krt knows
	// which Services a pod change can affect.
	endpoints := krt.NewCollection(services, func(ctx krt.HandlerContext, s exampleService) *exampleEndpoints {
		out := &exampleEndpoints{Service: s.Name}
		for _, p := range krt.Fetch(ctx, pods, krt.FilterIndex(podsByApp, s.App)) {
			out.IPs = append(out.IPs, p.IP)
		}
		return out
	}, krt.WithName("Endpoints"), krt.WithStop(stop))

	endpoints.WaitUntilSynced(stop)
	for _, e := range endpoints.List() {
		fmt.Printf("%s: %s\n", e.Service, strings.Join(e.IPs, ","))
	}

	// Events arrive on the handler's own goroutine: the current state is
	// replayed first (two adds), then each change.
	events := make(chan krt.Event[exampleEndpoints], 4)
	reg := endpoints.Register(func(e krt.Event[exampleEndpoints]) { events <- e })
	defer reg.UnregisterHandler()
	<-events
	<-events

	// A second reviews pod: only the reviews Service is recomputed.
	pods.UpdateObject(examplePod{Name: "reviews-2", App: "reviews", IP: "10.0.0.3"})
	e := <-events
	fmt.Printf("%s %s: %s\n", e.Event, e.New.Service, strings.Join(e.New.IPs, ","))

	// Lookup reads the index from outside a transformation.
	for _, p := range podsByApp.Lookup("reviews") {
		fmt.Println("reviews pod:", p.Name)
	}

	// Output:
	// ratings: 10.0.0.2
	// reviews: 10.0.0.1
	// update reviews: 10.0.0.1,10.0.0.3
	// reviews pod: reviews-1
	// reviews pod: reviews-2
}
