// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
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
// token authorization.
const xdsAuthServiceAccount = "serviceaccount"

// defaultXDSAuthRecheck is --xds-auth-recheck's default: how often an open
// stream's token and Gateway are checked again.
const defaultXDSAuthRecheck = time.Minute

// minXDSAuthRecheck is the shortest --xds-auth-recheck: each check is one
// TokenReview per open stream, on the client's shared rate limit.
const minXDSAuthRecheck = time.Second

// gatewayIdentities says which ServiceAccount may read a Gateway
// (gateway.Controller.ProxyServiceAccount).
type gatewayIdentities interface {
	// ProxyServiceAccount returns the ServiceAccount name, in the Gateway's
	// namespace, whose tokens authorize a proxy for Gateway
	// namespace/name; ok false when the Gateway is not one of ours,
	// synced false while that answer is not final.
	ProxyServiceAccount(namespace, name string) (serviceAccount string, ok, synced bool)
}

// saAuthenticator authorizes ADS streams by Kubernetes ServiceAccount
// token. A proxy sends "authorization: Bearer <token>" in its gRPC
// metadata, and names its Gateway in its node metadata (GATEWAY_NAMESPACE,
// GATEWAY_NAME). The stream is served only when:
//   - a TokenReview for audience accepts the token and confirms that
//     audience (a token issued for the API server, as every pod mounts, or
//     for anyone else, is refused);
//   - the token is a ServiceAccount's, and that ServiceAccount is the
//     Gateway's own: in its namespace, with the name its deployment runs as
//     (gateways.ProxyServiceAccount). Another ServiceAccount of the
//     namespace, "default" included, is refused;
//   - every request names that same Gateway.
//
// Every recheck (jittered by up to a tenth) the token is reviewed again and
// the Gateway's ServiceAccount looked up again: a token the API server no
// longer accepts (expired, its ServiceAccount or bound pod deleted) or a
// Gateway that is gone or now wants another ServiceAccount ends the stream
// with Unauthenticated or PermissionDenied and a log line naming the Gateway
// and the ServiceAccount. A TokenReview that fails (API server unreachable)
// keeps the stream until the next check, logged.
type saAuthenticator struct {
	reviews authnclient.TokenReviewInterface
	// audience is the audience the token must be for
	// (--xds-auth-audience).
	audience string
	// timeout bounds one TokenReview call.
	timeout time.Duration
	// recheck is the interval between checks of an open stream.
	recheck time.Duration
	// gateways is set before the server serves (the controller is built
	// after the gRPC options).
	gateways gatewayIdentities
	log      *slog.Logger
}

// serviceAccount is a ServiceAccount namespace and name.
type serviceAccount struct{ namespace, name string }

func (s serviceAccount) String() string { return s.namespace + "/" + s.name }

// reviewed is what a TokenReview said of a token.
type reviewed struct {
	sa serviceAccount
	// expires is the token's exp claim (zero when it has none); read only
	// from a token the API server accepted, to tell an expiry apart in the
	// log.
	expires time.Time
}

// streamInterceptor returns the gRPC stream interceptor. A stream without
// a bearer token, or with a token the API server does not accept for our
// audience, ends with Unauthenticated; a token that is not a
// ServiceAccount's, or a node naming a Gateway that ServiceAccount may not
// read, with PermissionDenied; a node naming no Gateway with
// InvalidArgument; a TokenReview that fails (API server unreachable), or a
// Gateway not read yet, with Unavailable.
func (a *saAuthenticator) streamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		token, err := bearerTokenOf(ss.Context())
		if err != nil {
			return err
		}
		who, err := a.review(ss.Context(), token)
		if err != nil {
			a.log.Debug("xds auth: stream refused", "error", err)
			return err
		}
		ctx, cancel := context.WithCancel(ss.Context())
		defer cancel()
		s := &authorizedStream{ServerStream: ss, ctx: ctx, cancel: cancel, a: a, token: token, who: who,
			revoked: make(chan struct{})}
		var wg sync.WaitGroup
		wg.Go(func() { a.recheckLoop(ctx, s) })
		err = handler(srv, s)
		cancel()
		wg.Wait()
		// The stream server ends quietly when a receive fails; the denial
		// is this stream's status.
		if denied := s.deniedErr(); denied != nil {
			return denied
		}
		return err
	}
}

// bearerTokenOf reads the one "authorization: Bearer <token>" entry.
func bearerTokenOf(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) != 1 {
		return "", status.Error(codes.Unauthenticated, "xds auth: want exactly one \"authorization: Bearer <ServiceAccount token>\" metadata entry")
	}
	token, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return "", status.Error(codes.Unauthenticated, "xds auth: authorization metadata is not \"Bearer <token>\"")
	}
	return token, nil
}

// review asks the API server who token belongs to, for our audience.
func (a *saAuthenticator) review(ctx context.Context, token string) (reviewed, error) {
	rctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	tr, err := a.reviews.Create(rctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{
		Token: token, Audiences: []string{a.audience},
	}}, metav1.CreateOptions{})
	if err != nil {
		return reviewed{}, status.Errorf(codes.Unavailable, "xds auth: TokenReview failed: %v", err)
	}
	if !tr.Status.Authenticated {
		return reviewed{}, status.Errorf(codes.Unauthenticated, "xds auth: token not accepted for audience %q: %s", a.audience, tr.Status.Error)
	}
	// An API server that ignored the audiences asked for answers with
	// none: the token's audience is then unchecked, so it is refused.
	if !slices.Contains(tr.Status.Audiences, a.audience) {
		return reviewed{}, status.Errorf(codes.Unauthenticated, "xds auth: the API server did not confirm the token is for audience %q (confirmed: %q)",
			a.audience, tr.Status.Audiences)
	}
	ns, name, ok := serviceAccountOf(tr.Status.User.Username)
	if !ok {
		return reviewed{}, status.Errorf(codes.PermissionDenied, "xds auth: %q is not a ServiceAccount", tr.Status.User.Username)
	}
	return reviewed{sa: serviceAccount{ns, name}, expires: tokenExpiry(token)}, nil
}

// authorize checks that sa may read Gateway gwNS/gwName: it is the
// Gateway's own ServiceAccount.
func (a *saAuthenticator) authorize(sa serviceAccount, gwNS, gwName string) error {
	if sa.namespace != gwNS {
		// Said before looking the Gateway up, so that the answer tells
		// nothing of another namespace's Gateways.
		return status.Errorf(codes.PermissionDenied,
			"xds auth: ServiceAccount %s may not read Gateway %s/%s: a Gateway is served only to its own ServiceAccount, in its namespace", sa, gwNS, gwName)
	}
	if a.gateways == nil {
		return status.Error(codes.Unavailable, "xds auth: the Gateways are not read yet")
	}
	want, ok, synced := a.gateways.ProxyServiceAccount(gwNS, gwName)
	switch {
	case !ok && !synced:
		return status.Errorf(codes.Unavailable, "xds auth: Gateway %s/%s: the Gateways are not all read yet", gwNS, gwName)
	case !ok:
		return status.Errorf(codes.PermissionDenied,
			"xds auth: Gateway %s/%s is not one of ours (it does not exist, or its class is not ours)", gwNS, gwName)
	case sa.name != want:
		return status.Errorf(codes.PermissionDenied,
			"xds auth: Gateway %s/%s is served only to its own ServiceAccount %s/%s, not to %s", gwNS, gwName, gwNS, want, sa)
	}
	return nil
}

// recheckLoop checks s's token and Gateway again every a.recheck (give or
// take a tenth) until ctx ends, and revokes s when they no longer pass.
func (a *saAuthenticator) recheckLoop(ctx context.Context, s *authorizedStream) {
	t := time.NewTimer(jitter(a.recheck))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		who, err := a.review(ctx, s.token)
		gw, gwNS, gwName := s.gatewayOf()
		if err == nil && gw != "" {
			err = a.authorize(who.sa, gwNS, gwName)
		}
		if ctx.Err() != nil {
			return
		}
		switch status.Code(err) {
		case codes.OK:
		case codes.Unavailable:
			a.log.Warn("xds auth: could not check an open ADS stream's identity again; it stays open until the next check",
				"gateway", gw, "serviceAccount", s.who.sa.String(), "error", err)
		default:
			level, why := slog.LevelWarn, "its identity is no longer authorized"
			if !s.who.expires.IsZero() && time.Now().After(s.who.expires) {
				// Routine: the kubelet has rotated the token file and the
				// proxy reconnects with the new token.
				level, why = slog.LevelInfo, "its token expired"
			}
			a.log.Log(ctx, level, "xds auth: ending an ADS stream: "+why,
				"gateway", gw, "serviceAccount", s.who.sa.String(), "error", err)
			s.revoke(err)
			return
		}
		t.Reset(jitter(a.recheck))
	}
}

// jitter is d give or take up to a tenth, so that streams opened together
// (after a restart) are not all checked in the same instant.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}

// tokenExpiry reads the exp claim of a JWT without verifying it (the API
// server did); zero when absent or unreadable.
func tokenExpiry(token string) time.Time {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(b, &claims) != nil || claims.Exp <= 0 {
		return time.Time{}
	}
	return time.Unix(claims.Exp, 0)
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

// authorizedStream checks each request's node: the first request must
// carry one naming a Gateway who may read, and every later node must name
// the same Gateway. A request that fails, or a revocation by the recheck,
// ends the stream: RecvMsg returns io.EOF (a revocation also interrupts a
// RecvMsg waiting for the proxy), the stream's context is cancelled, and
// the interceptor returns the denial as the status.
//
// Interrupting a waiting RecvMsg leaves the underlying receive running in
// its goroutine until the RPC ends, which follows at once: the stream
// server returns on the io.EOF, then the interceptor.
type authorizedStream struct {
	grpc.ServerStream
	ctx     context.Context
	cancel  context.CancelFunc
	a       *saAuthenticator
	token   string
	who     reviewed
	revoked chan struct{} // closed with denied set

	mu     sync.Mutex
	gw     string // "namespace/name" once the first node is authorized
	gwNS   string
	gwName string
	denied error
}

func (s *authorizedStream) Context() context.Context { return s.ctx }

func (s *authorizedStream) deniedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.denied
}

// gatewayOf is the Gateway the stream was authorized for ("" before its
// first request).
func (s *authorizedStream) gatewayOf() (key, ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gw, s.gwNS, s.gwName
}

// revoke ends the stream with err, once.
func (s *authorizedStream) revoke(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denyLocked(err)
}

// denyLocked records err as the stream's status (the first one wins),
// wakes a waiting RecvMsg and cancels the stream's context. Called with
// s.mu held.
func (s *authorizedStream) denyLocked(err error) {
	if s.denied != nil {
		return
	}
	s.denied = err
	close(s.revoked)
	s.cancel()
}

func (s *authorizedStream) RecvMsg(m any) error {
	select {
	case <-s.revoked:
		return io.EOF
	default:
	}
	got := make(chan error, 1)
	go func() { got <- s.ServerStream.RecvMsg(m) }()
	select {
	case err := <-got:
		if err != nil {
			return err
		}
	case <-s.revoked:
		return io.EOF
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.denied != nil {
		return io.EOF
	}
	req, ok := m.(interface{ GetNode() *corev3.Node })
	if !ok {
		// Only xDS requests, which name their proxy, are authorized.
		s.denyLocked(status.Errorf(codes.PermissionDenied, "xds auth: %T is not an xDS request", m))
		return io.EOF
	}
	if err := s.checkNodeLocked(req.GetNode()); err != nil {
		s.denyLocked(err)
		return io.EOF
	}
	return nil
}

// checkNodeLocked authorizes the stream for the Gateway of its first node
// and holds every later node to it. Called with s.mu held.
func (s *authorizedStream) checkNodeLocked(node *corev3.Node) error {
	if node == nil {
		if s.gw == "" {
			return status.Error(codes.PermissionDenied, "xds auth: the first request must carry node")
		}
		return nil
	}
	f := node.GetMetadata().GetFields()
	ns, name := f[xds.MetadataGatewayNamespace].GetStringValue(), f[xds.MetadataGatewayName].GetStringValue()
	if ns == "" || name == "" {
		return status.Errorf(codes.InvalidArgument, "xds auth: node %q: node.metadata must name the Gateway as string fields %s and %s",
			node.GetId(), xds.MetadataGatewayNamespace, xds.MetadataGatewayName)
	}
	key := ns + "/" + name
	if s.gw != "" {
		if key != s.gw {
			return status.Errorf(codes.PermissionDenied,
				"xds auth: this stream was authorized for Gateway %s; a later request names Gateway %s", s.gw, key)
		}
		return nil
	}
	if err := s.a.authorize(s.who.sa, ns, name); err != nil {
		if status.Code(err) == codes.PermissionDenied {
			// The token is valid: a proxy or a pod set up wrongly, worth
			// the operator's eye. Invalid tokens stay out of the log.
			s.a.log.Warn("xds auth: ADS stream refused", "gateway", key, "serviceAccount", s.who.sa.String(), "error", err)
		}
		return err
	}
	s.gw, s.gwNS, s.gwName = key, ns, name
	return nil
}

// xdsAuthMode is --xds-auth as it applies: "none" when unset.
func xdsAuthMode(o *discoveryOptions) string {
	if o.xdsAuth == "" {
		return "none"
	}
	return o.xdsAuth
}

// warnNoXDSAuth logs a warning when ADS serves without proxy
// authorization (--xds-auth=none, and always in file mode): whoever
// reaches the port and names a Gateway in its node metadata is sent that
// Gateway's configuration, the private keys of its HTTPS listeners
// included.
func warnNoXDSAuth(log *slog.Logger, o *discoveryOptions, ads net.Listener) {
	if xdsAuthMode(o) != "none" {
		return
	}
	why := "--xds-auth=none"
	if len(o.files) > 0 {
		why = "file mode has no proxy authorization"
	}
	log.Warn("ADS serves without proxy authorization ("+why+"): any client that reaches the ADS address and names a Gateway "+
		"reads its configuration and the private keys of its HTTPS listeners; use --xds-auth=serviceaccount in a cluster",
		"ads", ads.Addr().String(), "tls", !o.plaintext)
}
