// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeReviews answers TokenReviews from a table of tokens: a known token
// authenticates as its user, "api-down" fails the call, anything else is
// not authenticated.
func fakeReviews(t *testing.T) *saAuthenticator {
	users := map[string]string{
		"gw-token":    "system:serviceaccount:gateway-namespace:gateway-istio",
		"other-token": "system:serviceaccount:other-ns:gateway-istio",
		"user-token":  "alice",
	}
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "api-down" {
			return true, nil, errors.New("connection refused")
		}
		if u, ok := users[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u}}
		} else {
			tr.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	return &saAuthenticator{reviews: cs.AuthenticationV1().TokenReviews(), timeout: 5 * time.Second}
}

// TestXDSAuthServiceAccount: only a ServiceAccount token of the Gateway's
// namespace gets configuration.
func TestXDSAuthServiceAccount(t *testing.T) {
	e := startXDS(t, grpc.ChainStreamInterceptor(fakeReviews(t).streamInterceptor()))
	conn, err := grpc.NewClient(e.ads, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	cases := []struct {
		name  string
		token string // "" sends no authorization
		want  codes.Code
	}{
		{"service account of the Gateway's namespace", "gw-token", codes.OK},
		{"no token", "", codes.Unauthenticated},
		{"rejected token", "forged", codes.Unauthenticated},
		{"not a service account", "user-token", codes.PermissionDenied},
		{"service account of another namespace", "other-token", codes.PermissionDenied},
		{"TokenReview fails", "api-down", codes.Unavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.token != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.token)
			}
			s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, Node: proxyNode(gatewayRef{"gateway-namespace", "gateway"})})
			resp, err := s.Recv()
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code = %s (%v), want %s", got, err, tc.want)
			}
			if tc.want == codes.OK && len(resp.GetResources()) != 2 {
				t.Errorf("got %d clusters, want 2", len(resp.GetResources()))
			}
		})
	}
}

func TestServiceAccountOf(t *testing.T) {
	for user, want := range map[string][2]string{
		"system:serviceaccount:ns:sa":   {"ns", "sa"},
		"system:serviceaccount:ns":      {},
		"system:serviceaccount::sa":     {},
		"system:serviceaccount:ns:sa:x": {},
		"system:node:worker":            {},
	} {
		ns, name, ok := serviceAccountOf(user)
		if ok != (want[0] != "") || ns != want[0] || name != want[1] {
			t.Errorf("serviceAccountOf(%q) = %q, %q, %v", user, ns, name, ok)
		}
	}
}

// TestProxyConfigWithToken: proxy-config --token-file against a TLS server
// that authenticates proxies.
func TestProxyConfigWithToken(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	creds, err := serverCredentials(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	e := startXDS(t, grpc.Creds(creds), grpc.ChainStreamInterceptor(fakeReviews(t).streamInterceptor()))
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("gw-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := pc(t, e.ads, "clusters", "--ca-file", cert, "--token-file", tok)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(seedClustersFromServer, out); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	_, err = pc(t, e.ads, "clusters", "--ca-file", cert)
	wantErr(t, err, "Unauthenticated", "authorization")
}
