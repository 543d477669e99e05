// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/bootstrap"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pkg/kube"
)

// OurSide is infermesh's pilot-discovery in cluster mode
// (bootstrap.NewServer over a kube.NewFake client): informers, the Gateway
// API and InferencePool controller, the service registry, the translator
// and the ADS server, as `pilot-discovery discovery` runs them. It runs as
// a replica that is not the leader: like Istio's test server, it writes no
// status, and the shadow Services it would apply already exist. Debounce
// is 1ns (Istio's test server: 0), so a change is pushed at once.
//
// alter, when not nil, changes the inputs this side sees (the fairness
// check's deliberate difference); it must not modify in.
func OurSide(alter func(in *Inputs) (*Inputs, error)) Side {
	return Side{Name: "infermesh", Prepare: func(in *Inputs) (Instance, error) {
		if alter != nil {
			var err error
			if in, err = alter(in); err != nil {
				return nil, err
			}
		}
		objs := append([]runtime.Object{}, in.Objects...)
		for _, dr := range in.DestinationRules {
			objs = append(objs, dr.DeepCopy())
		}
		objs = append(objs, kube.OptionalCRDs()...)
		return &ours{client: kube.NewFake(objs...)}, nil
	}}
}

type ours struct {
	client *kube.Client
	srv    *bootstrap.Server
	lis    *bufconn.Listener
	cancel context.CancelFunc
	done   chan error
}

func (o *ours) Start() error {
	f := features.Defaults()
	f.EnableInferenceExtension = true
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := bootstrap.NewServer(bootstrap.Args{
		Client: o.client, Features: f, IsLeader: func() bool { return false },
		Debounce: time.Nanosecond, MaxDelay: time.Nanosecond, XDSLogger: discard,
	})
	if err != nil {
		return err
	}
	o.srv = srv
	o.lis = bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel, o.done = cancel, make(chan error, 1)
	go func() { o.done <- srv.Run(ctx, o.lis, nil, nil) }()
	return nil
}

func (o *ours) Dial() (*grpc.ClientConn, error) {
	if o.lis == nil {
		return nil, errors.New("not started")
	}
	return dialBufconn(o.lis)
}

func (o *ours) UpdateHTTPRoute(r *gwv1.HTTPRoute) error {
	_, err := o.client.GatewayAPI().GatewayV1().HTTPRoutes(r.Namespace).Update(context.Background(), r, metav1.UpdateOptions{})
	return err
}

func (o *ours) UpdateEndpointSlice(s *discoveryv1.EndpointSlice) error {
	_, err := o.client.Kube().DiscoveryV1().EndpointSlices(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{})
	return err
}

func (o *ours) Busy() bool { return false }

func (o *ours) Close() {
	if o.cancel != nil {
		o.cancel()
		<-o.done
		o.cancel = nil
	} else {
		o.client.Shutdown()
	}
}
