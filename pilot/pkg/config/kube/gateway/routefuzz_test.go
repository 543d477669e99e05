// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
	"github.com/infermesh/infermesh/pilot/pkg/networking/core"
	"github.com/infermesh/infermesh/pkg/test/seed"
)

// The route isolation property, over HTTPRoutes and GRPCRoutes that the
// CRDs accept (file mode's validator: the embedded CRDs' schema, defaults
// and CEL rules, as the API server applies them):
//
//  1. the Gateway's whole set, with the generated route attached beside
//     two fixed routes, passes core.Validate (BuildGateway returns no
//     error): whatever a user writes, the per-rule check keeps from the
//     translator what Envoy would refuse;
//  2. every Envoy route the fixed routes produce, and every cluster they
//     send to, is exactly what it is without the generated route: one
//     route never changes what another gets.
//
// TestRouteIsolationFixedSeed runs it in `make test` over inputs from a
// fixed seed; FuzzRouteIsolation runs it under the fuzzer (`make fuzz`).

const fuzzNamespace = seed.Namespace

// fuzzWorld is what every case shares: the validator and the translation
// of the fixed routes alone.
type fuzzWorld struct {
	validator *file.Validator
	baseline  core.Resources
}

var (
	fuzzOnce  sync.Once
	fuzzState fuzzWorld
	fuzzErr   error
)

func world(t *testing.T) fuzzWorld {
	t.Helper()
	fuzzOnce.Do(func() {
		v, err := file.NewValidator()
		if err != nil {
			fuzzErr = err
			return
		}
		fuzzState.validator = v
		fuzzState.baseline, fuzzErr = translateWith(t, nil)
	})
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	return fuzzState
}

// otherRoute is the second fixed route: a Service backend with header
// modifiers and a regular expression match, on its own host.
func otherRoute() *gwv1.HTTPRoute {
	r := seed.HTTPRoute()
	r.Name, r.Spec.Hostnames = "other", []gwv1.Hostname{"other.example.com"}
	r.Spec.Rules = []gwv1.HTTPRouteRule{{
		Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchRegularExpression), Value: ptr.To("/api/v[0-9]+/.*")}}},
		Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "X-Tenant", Value: "other"}}}}},
		BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Name: "svc", Port: ptr.To(gwv1.PortNumber(80))}}}},
	}}
	return r
}

func fuzzService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: fuzzNamespace, Name: "svc"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// translateWith runs the controller over the fixed world plus extra (a
// validated route, or nil) and builds the Gateway's resources.
func translateWith(t *testing.T, extra any) (core.Resources, error) {
	objs := append(seedObjects(), otherRoute(), fuzzService())
	if extra != nil {
		objs = append(objs, extra)
	}
	p := newPipeline(t, true, objs...)
	gw := p.out.Models.GetKey(seed.GatewayNamespace + "/" + seed.GatewayName)
	if gw == nil {
		return core.Resources{}, fmt.Errorf("no translator view of the Gateway")
	}
	return core.BuildGateway(gw, core.Inputs{}, core.Options{InferenceEnabled: true, ClusterDomain: "cluster.local"})
}

// checkIsolation is the property for one generated document.
func checkIsolation(t *testing.T, data []byte) {
	w := world(t)
	obj, problems := w.validator.Decode(generateRoute(data))
	if obj == nil || len(problems) > 0 {
		return // not something the API server would store
	}
	res, err := translateWith(t, obj)
	if err != nil {
		js, _ := json.Marshal(obj)
		t.Fatalf("the Gateway's set is refused with a CRD-valid route attached:\n%v\nroute: %s", err, js)
	}
	fixed := func(name string) bool {
		return strings.HasPrefix(name, fuzzNamespace+"."+seed.RouteName+".") || strings.HasPrefix(name, fuzzNamespace+".other.")
	}
	want := fixedRoutes(w.baseline, fixed)
	got := fixedRoutes(res, fixed)
	for k, r := range want {
		if !proto.Equal(r, got[k]) {
			js, _ := json.Marshal(obj)
			t.Fatalf("fixed route %s changed with the generated route attached:\nwant %v\ngot  %v\nroute: %s", k, r, got[k], js)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("fixed routes: %d, want %d", len(got), len(want))
	}
	clusters := map[string]bool{}
	for _, c := range res.Clusters {
		clusters[c.GetName()] = true
	}
	for _, c := range w.baseline.Clusters {
		if !clusters[c.GetName()] {
			t.Fatalf("cluster %s of the fixed routes is gone", c.GetName())
		}
		for _, rc := range res.Clusters {
			if rc.GetName() == c.GetName() && !proto.Equal(rc, c) {
				t.Fatalf("cluster %s changed:\nwant %v\ngot  %v", c.GetName(), c, rc)
			}
		}
	}
}

// fixedRoutes are the Envoy routes of the fixed routes, by virtual host
// and route name and position among them.
func fixedRoutes(res core.Resources, fixed func(string) bool) map[string]*routev3.Route {
	out := map[string]*routev3.Route{}
	for _, rc := range res.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			n := 0
			for _, r := range vh.GetRoutes() {
				if fixed(r.GetName()) {
					out[fmt.Sprintf("%s/%s/%s#%d", rc.GetName(), vh.GetName(), r.GetName(), n)] = r
					n++
				}
			}
		}
	}
	return out
}

func TestRouteIsolationFixedSeed(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 1))
	accepted := 0
	const cases = 400
	for i := range cases {
		data := make([]byte, 32+rng.IntN(480))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		if obj, _ := world(t).validator.Decode(generateRoute(data)); obj != nil {
			accepted++
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkIsolation(t, data) })
	}
	// The generator must mostly produce routes the CRDs accept, or the
	// property is checked on too few.
	if accepted < cases/4 {
		t.Errorf("only %d of %d generated routes pass CRD validation", accepted, cases)
	}
	t.Logf("%d of %d generated routes pass CRD validation", accepted, cases)
}

func FuzzRouteIsolation(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add([]byte("\x00\x01\x00\x01\x01\x02\x03\x01a\r\nb\x02\x01\x05"))
	f.Fuzz(checkIsolation)
}

// gen turns fuzz bytes into choices; exhausted, it returns zeros.
type gen struct{ b []byte }

func (g *gen) byte() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *gen) n(k int) int { return int(g.byte()) % k }

// fuzzWords are values that reach the translator's edge cases: regular
// expressions RE2 refuses or finds large, header values with control
// characters or '%', Host and pseudo-header names, paths and durations.
var fuzzWords = []string{
	"/", "/v1", "/v1/", "/a%b", "/a%2F", "//x", "/./a", "/../a", "/a?b", "/a#b", "/*",
	"^/v1/.*$", "/(a", "\\pL+", "(?<n>x)", "(?P<n>x)", "[a-z0-9-]{1,64}", "[^/]{1,1000}", "a{1000}", ".*", "(a|b)*c",
	"a\r\nb", "x\x00y", "\n", "%START_TIME%", "100%", "%%", "%", "plain value", "é",
	"host", "Host", ":authority", ":path", "x-h", "X-Upper", "content-length", "te",
	"a.example.com", "*.example.com", "other.example.com", "llm.ssup2.com", "xn--bcher-kva.example",
	"10s", "0s", "1h", "1ms", "500ms", "http", "https", "GET", "POST",
	"svc", "pool", "inference.networking.k8s.io", "InferencePool", "Service", "",
}

func (g *gen) str() string {
	if g.byte()&1 == 0 {
		return fuzzWords[g.n(len(fuzzWords))]
	}
	n := g.n(24)
	var b strings.Builder
	for range n {
		b.WriteByte(g.byte())
	}
	return b.String()
}

// pick returns one of words, or, one time in eight, str(): constrained
// fields (hostnames, header names, paths, durations) mostly get values the
// CRDs accept, so that the property is checked on many routes, and
// sometimes anything.
func (g *gen) pick(words ...string) string {
	if g.n(8) == 0 {
		return g.str()
	}
	return words[g.n(len(words))]
}

func (g *gen) host() string {
	return g.pick("a.example.com", "*.example.com", "other.example.com", "llm.ssup2.com", "b.example.com", "*.ssup2.com")
}

func (g *gen) headerName() string {
	return g.pick("x-h", "X-Upper", "host", "Host", "content-length", "x-tenant", "te", "x-gateway-destination-endpoint")
}

func (g *gen) path() string {
	if g.n(4) == 0 {
		return "/" + g.str()
	}
	return g.pick("/", "/v1", "/v1/", "/a%b", "/a%2F", "//x", "/./a", "/../a", "/api/v1/models", "/v1/completions")
}

func (g *gen) duration() string { return g.pick("10s", "0s", "1h", "1ms", "500ms", "1h30m") }

// generateRoute builds one HTTPRoute or GRPCRoute document (JSON) in the
// fixed routes' namespace, attached to the seed Gateway, from data.
func generateRoute(data []byte) []byte {
	g := &gen{b: data}
	grpc := g.n(4) == 0
	kind := "HTTPRoute"
	if grpc {
		kind = "GRPCRoute"
	}
	spec := map[string]any{
		"parentRefs": []any{map[string]any{"name": seed.GatewayName, "namespace": seed.GatewayNamespace}},
	}
	if hs := g.n(3); hs > 0 {
		var hosts []any
		for range hs {
			hosts = append(hosts, g.host())
		}
		spec["hostnames"] = hosts
	}
	var rules []any
	for range 1 + g.n(3) {
		if grpc {
			rules = append(rules, g.grpcRule())
		} else {
			rules = append(rules, g.httpRule())
		}
	}
	spec["rules"] = rules
	doc := map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
		"metadata": map[string]any{"namespace": fuzzNamespace, "name": "generated", "generation": 1,
			"creationTimestamp": "2026-01-01T00:00:00Z"},
		"spec": spec,
	}
	out, err := json.Marshal(doc)
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	return out
}

func (g *gen) httpRule() map[string]any {
	r := map[string]any{}
	var matches []any
	for range g.n(3) {
		m := map[string]any{}
		if g.n(2) == 0 {
			typ := []string{"Exact", "PathPrefix", "RegularExpression"}[g.n(3)]
			value := g.path()
			if typ == "RegularExpression" {
				value = g.str()
			}
			m["path"] = map[string]any{"type": typ, "value": value}
		}
		if g.n(3) == 0 {
			m["headers"] = []any{map[string]any{"type": []string{"Exact", "RegularExpression"}[g.n(2)], "name": g.headerName(), "value": g.str()}}
		}
		if g.n(4) == 0 {
			m["queryParams"] = []any{map[string]any{"type": []string{"Exact", "RegularExpression"}[g.n(2)], "name": g.pick("q", "model", "a-b"), "value": g.str()}}
		}
		if g.n(4) == 0 {
			m["method"] = []string{"GET", "POST", "PUT", "DELETE"}[g.n(4)]
		}
		matches = append(matches, m)
	}
	if matches != nil {
		r["matches"] = matches
	}
	var filters []any
	for range g.n(3) {
		filters = append(filters, g.httpFilter())
	}
	if filters != nil {
		r["filters"] = filters
	}
	r["backendRefs"] = g.backendRefs(func() any { return g.headerFilter() })
	if g.n(4) == 0 {
		r["timeouts"] = map[string]any{"request": g.duration()}
	}
	return r
}

func (g *gen) grpcRule() map[string]any {
	r := map[string]any{}
	if g.n(2) == 0 {
		m := map[string]any{"method": map[string]any{"type": []string{"Exact", "RegularExpression"}[g.n(2)], "service": g.str(), "method": g.str()}}
		if g.n(3) == 0 {
			m["headers"] = []any{map[string]any{"name": g.headerName(), "value": g.str()}}
		}
		r["matches"] = []any{m}
	}
	if g.n(2) == 0 {
		r["filters"] = []any{g.headerFilter()}
	}
	r["backendRefs"] = g.backendRefs(func() any { return g.headerFilter() })
	return r
}

func (g *gen) headerModifier() map[string]any {
	m := map[string]any{}
	for _, op := range []string{"set", "add"} {
		if g.n(2) == 0 {
			m[op] = []any{map[string]any{"name": g.headerName(), "value": g.str()}}
		}
	}
	if g.n(3) == 0 {
		m["remove"] = []any{g.headerName()}
	}
	return m
}

func (g *gen) headerFilter() map[string]any {
	if g.n(2) == 0 {
		return map[string]any{"type": "RequestHeaderModifier", "requestHeaderModifier": g.headerModifier()}
	}
	return map[string]any{"type": "ResponseHeaderModifier", "responseHeaderModifier": g.headerModifier()}
}

func (g *gen) pathModifier() map[string]any {
	if g.n(2) == 0 {
		return map[string]any{"type": "ReplaceFullPath", "replaceFullPath": g.path()}
	}
	return map[string]any{"type": "ReplacePrefixMatch", "replacePrefixMatch": g.path()}
}

func (g *gen) httpFilter() map[string]any {
	switch g.n(7) {
	case 0, 1:
		return g.headerFilter()
	case 2:
		rd := map[string]any{}
		if g.n(2) == 0 {
			rd["scheme"] = []string{"http", "https"}[g.n(2)]
		}
		if g.n(2) == 0 {
			rd["hostname"] = g.host()
		}
		if g.n(2) == 0 {
			rd["path"] = g.pathModifier()
		}
		if g.n(3) == 0 {
			rd["port"] = 1 + g.n(65535)
		}
		if g.n(3) == 0 {
			rd["statusCode"] = []int{301, 302, 303, 307, 308}[g.n(5)]
		}
		return map[string]any{"type": "RequestRedirect", "requestRedirect": rd}
	case 3:
		rw := map[string]any{}
		if g.n(2) == 0 {
			rw["hostname"] = g.host()
		}
		if g.n(2) == 0 {
			rw["path"] = g.pathModifier()
		}
		return map[string]any{"type": "URLRewrite", "urlRewrite": rw}
	case 4:
		m := map[string]any{"backendRef": map[string]any{"name": "svc", "port": 80}}
		if g.n(2) == 0 {
			m["percent"] = g.n(101)
		}
		return map[string]any{"type": "RequestMirror", "requestMirror": m}
	case 5:
		c := map[string]any{"allowOrigins": []any{g.pick("*", "https://a.example.com", "https://*.example.com", "http://x:8080")}}
		if g.n(2) == 0 {
			c["allowHeaders"] = []any{g.headerName()}
		}
		if g.n(2) == 0 {
			c["allowMethods"] = []any{[]string{"GET", "POST", "*"}[g.n(3)]}
		}
		if g.n(2) == 0 {
			c["exposeHeaders"] = []any{g.headerName()}
		}
		return map[string]any{"type": "CORS", "cors": c}
	default:
		return map[string]any{"type": "ExtensionRef", "extensionRef": map[string]any{"group": "example.com", "kind": "X", "name": g.str()}}
	}
}

// backendRefs are up to two refs to the fixed Service or pool, with
// weights and their own filters.
func (g *gen) backendRefs(filter func() any) []any {
	var out []any
	for range g.n(3) {
		var b map[string]any
		if g.n(2) == 0 {
			b = map[string]any{"name": "svc", "port": 80}
		} else {
			b = map[string]any{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": seed.PoolName}
		}
		if g.n(2) == 0 {
			b["weight"] = g.n(4)
		}
		if g.n(2) == 0 {
			b["filters"] = []any{filter()}
		}
		out = append(out, b)
	}
	return out
}
