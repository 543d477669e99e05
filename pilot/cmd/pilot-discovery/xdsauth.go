// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/infermesh/infermesh/pilot/pkg/xds"
)

// xdsAuthServiceAccount is the --xds-auth value that turns on ServiceAccount
// token authentication.
const xdsAuthServiceAccount = "serviceaccount"

// saAuthenticator authenticates ADS streams by Kubernetes ServiceAccount
// token. A proxy sends "authorization: Bearer <token>" in its gRPC
// metadata; the token is checked with a TokenReview, and the
// ServiceAccount's namespace must be the namespace of the Gateway the proxy
// names in its node metadata (GATEWAY_NAMESPACE). So a proxy can read only
// the configuration of Gateways in its own namespace.
type saAuthenticator struct {
	reviews authnclient.TokenReviewInterface
	// timeout bounds one TokenReview call.
	timeout time.Duration
}

// streamInterceptor returns the gRPC stream interceptor. A stream without
// a bearer token or with a token the API server does not accept ends with
// Unauthenticated; a token that is not a ServiceAccount's, or a node naming
// a Gateway outside the ServiceAccount's namespace, with PermissionDenied;
// a TokenReview that fails (API server unreachable) with Unavailable.
func (a *saAuthenticator) streamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ns, err := a.authenticate(ss.Context())
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(ss.Context())
		defer cancel()
		s := &namespaceCheckedStream{ServerStream: ss, ctx: ctx, cancel: cancel, namespace: ns}
		err = handler(srv, s)
		// The stream server ends quietly when a receive fails; the denial
		// is this stream's status.
		if denied := s.deniedErr(); denied != nil {
			return denied
		}
		return err
	}
}

// authenticate returns the namespace of the ServiceAccount whose token the
// stream carries.
func (a *saAuthenticator) authenticate(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) != 1 {
		return "", status.Error(codes.Unauthenticated, "xds auth: want exactly one \"authorization: Bearer <ServiceAccount token>\" metadata entry")
	}
	token, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return "", status.Error(codes.Unauthenticated, "xds auth: authorization metadata is not \"Bearer <token>\"")
	}
	rctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	tr, err := a.reviews.Create(rctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return "", status.Errorf(codes.Unavailable, "xds auth: TokenReview failed: %v", err)
	}
	if !tr.Status.Authenticated {
		return "", status.Errorf(codes.Unauthenticated, "xds auth: token not accepted: %s", tr.Status.Error)
	}
	ns, _, ok := serviceAccountOf(tr.Status.User.Username)
	if !ok {
		return "", status.Errorf(codes.PermissionDenied, "xds auth: %q is not a ServiceAccount", tr.Status.User.Username)
	}
	return ns, nil
}

// serviceAccountOf splits "system:serviceaccount:<ns>:<name>".
func serviceAccountOf(user string) (ns, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return ns, name, true
}

// namespaceCheckedStream checks each request's node: the first request must
// carry one, and every node must name a Gateway in namespace. A request
// that fails ends the stream: RecvMsg returns io.EOF, the stream's context
// is cancelled, and the interceptor returns the denial as the status.
type namespaceCheckedStream struct {
	grpc.ServerStream
	ctx       context.Context
	cancel    context.CancelFunc
	namespace string

	mu     sync.Mutex
	seen   bool
	denied error
}

func (s *namespaceCheckedStream) Context() context.Context { return s.ctx }

func (s *namespaceCheckedStream) deniedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.denied
}

func (s *namespaceCheckedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	req, ok := m.(interface{ GetNode() *corev3.Node })
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.denied != nil {
		return io.EOF
	}
	node := req.GetNode()
	switch {
	case node == nil && !s.seen:
		s.denied = status.Error(codes.PermissionDenied, "xds auth: the first request must carry node")
	case node == nil:
		return nil
	default:
		s.seen = true
		if gwNS := node.GetMetadata().GetFields()[xds.MetadataGatewayNamespace].GetStringValue(); gwNS != s.namespace {
			s.denied = status.Errorf(codes.PermissionDenied,
				"xds auth: ServiceAccount of namespace %q may not read Gateways of namespace %q", s.namespace, gwNS)
		}
	}
	if s.denied != nil {
		s.cancel()
		return io.EOF
	}
	return nil
}
