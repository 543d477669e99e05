// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// Envoy's route table check tool corpus judged against the stand-in's
// route table: for every pair pairs.tsv lists, every test of the test file
// runs as Envoy's router_check tool runs it (test/tools/router_check/
// router.cc, RouterCheckTool::compareEntries): its input becomes request
// headers, the stand-in's route matcher picks the virtual host and route,
// the stand-in's route actions produce what the tool reads (cluster,
// virtual host, rewritten path and host, the redirect URI and code, the
// request and response headers), and each validate field is judged as the
// tool judges it. The outcome must be the one Envoy's tool has (pairs.tsv).
//
// What the stand-in does not implement is never ignored: a test is
// not applicable ("unsupported") when the stand-in refuses the part of the route
// configuration the test reaches (routeThroughReached), and the field it names is
// listed. The figures are pinned below and in architecture/dataplane.md.

// Current figures: change them with architecture/dataplane.md ("Figures
// against targets") when the stand-in's route table changes.
const (
	wantCorpusAgree       = 39
	wantCorpusUnsupported = 68
)

// corpusOutcome is how one corpus test came out.
type corpusOutcome struct {
	name string
	// unsupported is what the stand-in refused ("" when it accepted the
	// reached configuration): "unsupported field " and the field's full
	// name, or "unsupported: " and the stand-in's message.
	unsupported string
	// failed lists the checks that failed, in the tool's words.
	failed []string
	// agree reports whether the checks failed exactly as in Envoy.
	agree bool
}

func TestEnvoyRouterCheckCorpus(t *testing.T) {
	dir := corpusDir
	pairs, err := readPairs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []corpusOutcome
	for _, p := range pairs {
		rc, err := loadRouteConfig(filepath.Join(dir, p.config))
		if err != nil {
			t.Fatal(err)
		}
		v, err := loadValidation(filepath.Join(dir, p.tests))
		if err != nil {
			t.Fatal(err)
		}
		var fileAgree, fileDisagree, fileNA int
		for _, it := range v.Tests {
			o, err := runCorpusTest(rc, &it, p.failResponseHeaderMatches)
			if err != nil {
				t.Errorf("%s with %s, test %q: %v", p.config, p.tests, it.TestName, err)
				continue
			}
			o.name = p.tests + ": " + it.TestName
			switch {
			case o.unsupported != "":
				fileNA++
				t.Logf("not applicable: %s: the stand-in refuses its configuration: %s", o.name, o.unsupported)
			case o.agree:
				fileAgree++
				t.Logf("agrees: %s (failed as in Envoy: %d checks)", o.name, len(o.failed))
			default:
				fileDisagree++
				t.Errorf("disagrees with Envoy: %s: %s", o.name, strings.Join(o.failed, "; "))
			}
			outcomes = append(outcomes, o)
		}
		t.Logf("%s with %s: %d agree, %d disagree, %d not applicable", p.tests, p.config, fileAgree, fileDisagree, fileNA)
	}
	agree, disagree, unsupported := 0, 0, map[string]int{}
	nUnsupported := 0
	for _, o := range outcomes {
		switch {
		case o.unsupported != "":
			unsupported[o.unsupported]++
			nUnsupported++
		case o.agree:
			agree++
		default:
			disagree++
		}
	}
	var fields []string
	for f, n := range unsupported {
		fields = append(fields, fmt.Sprintf("%s (%d)", f, n))
	}
	sort.Strings(fields)
	t.Logf("Envoy's router_check corpus: %d tests: %d agree, %d disagree, %d not applicable (refused): %s",
		len(outcomes), agree, disagree, nUnsupported, strings.Join(fields, ", "))
	if agree != wantCorpusAgree || nUnsupported != wantCorpusUnsupported {
		t.Errorf("%d agree and %d unsupported, want %d and %d (the figures in architecture/dataplane.md): update both",
			agree, nUnsupported, wantCorpusAgree, wantCorpusUnsupported)
	}
}

// The corpus is Envoy's, byte for byte: every file PROVENANCE.md lists is
// there with the git blob id it gives (what `git rev-parse
// <commit>:test/tools/router_check/test/config/<file>` prints in Envoy's
// repository), and every other file of the folder is ours
// (PROVENANCE.md, pairs.tsv). Each pair's files are Envoy's.
func TestEnvoyRouterCheckCorpusIsEnvoys(t *testing.T) {
	blobs, err := provenanceBlobs(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(blobs) < 30 {
		t.Fatalf("PROVENANCE.md lists %d files with blob ids, want the 31 of Envoy's folder and its LICENSE", len(blobs))
	}
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		seen[name] = true
		want, ok := blobs[name]
		if !ok {
			if name != "PROVENANCE.md" && name != "pairs.tsv" {
				t.Errorf("%s/%s is neither Envoy's (in PROVENANCE.md) nor ours (PROVENANCE.md, pairs.tsv)", corpusDir, name)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(corpusDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := gitBlobID(b); got != want {
			t.Errorf("%s: git blob %s, PROVENANCE.md says Envoy's is %s: the copy is not Envoy's", name, got, want)
		}
	}
	for name := range blobs {
		if !seen[name] {
			t.Errorf("PROVENANCE.md lists %s, which is not in %s", name, corpusDir)
		}
	}
	pairs, err := readPairs(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pairs {
		for _, f := range []string{p.config, p.tests} {
			if blobs[f] == "" {
				t.Errorf("pairs.tsv names %s, which is not one of Envoy's files", f)
			}
		}
	}
}

// runCorpusTest runs one test. An error is a test this harness cannot
// judge (never counted).
func runCorpusTest(rc *routev3.RouteConfiguration, it *validationItem, failResponseHeaderMatches bool) (corpusOutcome, error) {
	in, c := &it.Input, &it.Validate
	req, resp, err := toolRequest(in)
	if err != nil {
		return corpusOutcome{}, err
	}
	reads := headersRead(c)
	vh, r, refused, err := routeThroughReached(rc, req, reads, c.VirtualClusterName != nil)
	if err != nil {
		return corpusOutcome{}, err
	}
	if refused != "" {
		return corpusOutcome{unsupported: refused}, nil
	}
	got, err := toolResultOf(vh, r, req, resp, in, len(reads[0]) > 0)
	if err != nil {
		return corpusOutcome{}, err
	}
	failed, rhmFailed, err := judge(c, got)
	if err != nil {
		return corpusOutcome{}, err
	}
	o := corpusOutcome{failed: failed}
	if failResponseHeaderMatches {
		// Exactly the response_header_matches fail, every one of them.
		o.agree = len(failed) == rhmFailed && rhmFailed == len(c.responseHeaderMatches) && rhmFailed > 0
	} else {
		o.agree = len(failed) == 0
	}
	return o, nil
}

// toolRequest is ToolConfig::create: the request headers :authority,
// :path, :method, x-forwarded-proto and :scheme (https with ssl, else
// http), x-envoy-internal "true" when internal, then
// additional_request_headers; the response headers start as
// additional_response_headers. dynamic_metadata and runtime only reach
// dynamic_metadata and runtime_fraction matchers and runtime weights,
// which the stand-in refuses (so a test that depends on them is
// unsupported before they matter).
func toolRequest(in *validationInput) (*extproc.Request, http.Header, error) {
	scheme := "http"
	if in.SSL {
		scheme = "https"
	}
	req := &extproc.Request{Method: in.Method, Path: in.Path, Authority: in.Authority, Scheme: scheme, Headers: http.Header{}}
	req.Headers.Set("x-forwarded-proto", scheme)
	if in.Internal {
		req.Headers.Set("x-envoy-internal", "true")
	}
	for _, h := range in.requestHeaders {
		if strings.HasPrefix(h.GetKey(), ":") {
			return nil, nil, fmt.Errorf("additional_request_headers sets %s, which the tool sets from the input itself", h.GetKey())
		}
		req.Headers.Add(h.GetKey(), h.GetValue())
	}
	resp := http.Header{}
	for _, h := range in.responseHeaders {
		resp.Add(h.GetKey(), h.GetValue())
	}
	return req, resp, nil
}

// headersRead is every header name (lower case) the test's header checks
// read, request and response apart.
func headersRead(c *validationCheck) (reads [2]map[string]bool) {
	reads = [2]map[string]bool{{}, {}}
	for _, m := range c.requestHeaderMatches {
		reads[0][strings.ToLower(m.GetName())] = true
	}
	for _, f := range c.requestHeaderFields {
		reads[0][strings.ToLower(f.GetKey())] = true
	}
	for _, m := range c.responseHeaderMatches {
		reads[1][strings.ToLower(m.GetName())] = true
	}
	for _, f := range c.responseHeaderFields {
		reads[1][strings.ToLower(f.GetKey())] = true
	}
	return reads
}

// routeThroughReached routes req through the part of rc it reaches, each
// part first accepted by the stand-in as RDS would accept it
// (decodeResource: Envoy's proto validation, the allowed-field walk, the
// route table compiled). refused names what the stand-in refused; err is a
// refusal Envoy would not make (the tool loads every corpus
// configuration), so a disagreement.
//
// The reached part grows with the request's way through the table, as
// Envoy's RouteMatcher walks it (source/common/router/config_impl.cc):
//   - the virtual host is chosen on domains alone (findVirtualHost), so
//     the other virtual hosts are reached only by their domains;
//   - routes are tried in order and the first match wins
//     (VirtualHostImpl::getRouteFromRoutes), so the routes after it are
//     never reached; each route up to it is (its match is evaluated);
//   - virtual_clusters only name the request for stats (the router's
//     virtualCluster() lookup): reached only by the virtual_cluster_name
//     check;
//   - header mutations (headers_to_add/remove at every level,
//     internal_only_headers) change only the headers they name (Envoy
//     refuses host and ':'-prefixed ones), so an entry whose header
//     neither a check of the test nor any route's header matcher reads is
//     not reached (the matchers count in case a removal runs before
//     routing).
func routeThroughReached(rc *routev3.RouteConfiguration, req *extproc.Request, checked [2]map[string]bool, vclusterChecked bool) (vh *virtualHost, r *route, refused string, err error) {
	reads := [2]map[string]bool{maps.Clone(checked[0]), checked[1]}
	for _, v := range rc.GetVirtualHosts() {
		for _, rt := range v.GetRoutes() {
			for _, h := range rt.GetMatch().GetHeaders() {
				reads[0][strings.ToLower(h.GetName())] = true
			}
		}
	}
	// The virtual host, by domains: each named by its index.
	probe := &routev3.RouteConfiguration{Name: rc.GetName(), IgnorePortInHostMatching: rc.GetIgnorePortInHostMatching()}
	for i, v := range rc.GetVirtualHosts() {
		probe.VirtualHosts = append(probe.VirtualHosts, &routev3.VirtualHost{Name: strconv.Itoa(i), Domains: v.GetDomains()})
	}
	t, refused, err := acceptedTable(probe)
	if refused != "" || err != nil {
		return nil, nil, refused, err
	}
	pvh, _ := t.matchRoute(req)
	reached := proto.Clone(rc).(*routev3.RouteConfiguration)
	reached.VirtualHosts = nil
	stripUnread(reached, reads)
	if pvh == nil {
		_, refused, err = acceptedTable(reached)
		return nil, nil, refused, err
	}
	i, _ := strconv.Atoi(pvh.name)
	v := proto.Clone(rc.GetVirtualHosts()[i]).(*routev3.VirtualHost)
	if !vclusterChecked {
		v.VirtualClusters = nil
	}
	stripUnread(v, reads)
	routes := v.Routes
	reached.VirtualHosts = []*routev3.VirtualHost{v}
	for k := 0; k == 0 || k < len(routes); k++ {
		v.Routes = routes[:min(k+1, len(routes))]
		for _, rt := range v.Routes {
			stripUnread(rt, reads)
		}
		t, refused, err := acceptedTable(reached)
		if refused != "" || err != nil {
			return nil, nil, refused, err
		}
		if vh, r = t.matchRoute(req); r != nil {
			return vh, r, "", nil
		}
	}
	return vh, nil, "", nil
}

// acceptedTable is the route table the stand-in compiles from rc when RDS
// brings it, or what it refused: an unimplemented field's full name, a
// "not implemented" message; any other refusal is an error (the
// configuration is valid for Envoy).
func acceptedTable(rc *routev3.RouteConfiguration) (*routeTable, string, error) {
	a, err := anypb.New(rc)
	if err != nil {
		return nil, "", err
	}
	d, err := decodeResource(resourcev3.RouteType, a)
	var uf *UnimplementedFieldError
	var ic *InvalidConfigError
	switch {
	case err == nil:
		return d.value.(*routeEntry).table, "", nil
	case errors.As(err, &uf):
		return nil, "unsupported field " + uf.Field, nil
	case !errors.As(err, &ic) && strings.Contains(err.Error(), "not implemented"):
		return nil, "unsupported: " + strings.TrimPrefix(err.Error(), rc.GetName()+": "), nil
	}
	return nil, "", fmt.Errorf("the stand-in refuses a route configuration Envoy accepts: %w", err)
}

// stripUnread removes, from m's own header mutations, the entries whose
// header no check reads (request mutations against reads[0], response
// against reads[1]).
func stripUnread(m proto.Message, reads [2]map[string]bool) {
	adds := func(l []*corev3.HeaderValueOption, dir int) []*corev3.HeaderValueOption {
		return slices.DeleteFunc(l, func(o *corev3.HeaderValueOption) bool {
			return !reads[dir][strings.ToLower(o.GetHeader().GetKey())]
		})
	}
	removes := func(l []string, dir int) []string {
		return slices.DeleteFunc(l, func(n string) bool { return !reads[dir][strings.ToLower(n)] })
	}
	switch x := m.(type) {
	case *routev3.RouteConfiguration:
		x.RequestHeadersToAdd, x.RequestHeadersToRemove = adds(x.RequestHeadersToAdd, 0), removes(x.RequestHeadersToRemove, 0)
		x.ResponseHeadersToAdd, x.ResponseHeadersToRemove = adds(x.ResponseHeadersToAdd, 1), removes(x.ResponseHeadersToRemove, 1)
		x.InternalOnlyHeaders = removes(x.InternalOnlyHeaders, 0)
	case *routev3.VirtualHost:
		x.RequestHeadersToAdd, x.RequestHeadersToRemove = adds(x.RequestHeadersToAdd, 0), removes(x.RequestHeadersToRemove, 0)
		x.ResponseHeadersToAdd, x.ResponseHeadersToRemove = adds(x.ResponseHeadersToAdd, 1), removes(x.ResponseHeadersToRemove, 1)
	case *routev3.Route:
		x.RequestHeadersToAdd, x.RequestHeadersToRemove = adds(x.RequestHeadersToAdd, 0), removes(x.RequestHeadersToRemove, 0)
		x.ResponseHeadersToAdd, x.ResponseHeadersToRemove = adds(x.ResponseHeadersToAdd, 1), removes(x.ResponseHeadersToRemove, 1)
		for _, cw := range x.GetRoute().GetWeightedClusters().GetClusters() {
			cw.RequestHeadersToAdd, cw.RequestHeadersToRemove = adds(cw.RequestHeadersToAdd, 0), removes(cw.RequestHeadersToRemove, 0)
			cw.ResponseHeadersToAdd, cw.ResponseHeadersToRemove = adds(cw.ResponseHeadersToAdd, 1), removes(cw.ResponseHeadersToRemove, 1)
		}
	}
}

// toolResult is what the tool's checks read once a route is chosen.
type toolResult struct {
	// routeEntry and direct are Route::routeEntry() and
	// directResponseEntry() being set; neither without a route.
	routeEntry, direct                               bool
	cluster, vhost, pathRewrite, hostRewrite, newURI string
	code                                             uint32
	request, response                                headerView
}

// toolResultOf is RouterCheckTool::finalizeHeaders on the stand-in's
// route: for a route entry (a cluster or weighted clusters, picked with
// random_value), the request headers finalized (the stand-in's
// routeSel.finalizeRequest: header mutations, path and host rewrites) and
// the response headers (routeSel.finalizeResponseHeaders on
// additional_response_headers); for a direct response entry (redirect or
// direct_response), the URI newUri builds (the stand-in's newURI), the
// status, and the response headers as the tool assembles them: the local
// reply's own (the stand-in's localReply, for the status and body, the
// tool passing no modify_headers to Utility::sendLocalReply) added to
// additional_response_headers, then the route's response header
// mutations (finalizeResponseHeaders). A redirect's path rewrite also
// rewrites the request's :path in the tool (rewritePathHeader); not
// modelled here, so a test reading request headers after one is an error.
func toolResultOf(vh *virtualHost, r *route, req *extproc.Request, resp http.Header, in *validationInput, readsRequest bool) (toolResult, error) {
	var res toolResult
	switch {
	case r == nil:
	case r.kind == actionRedirect || r.kind == actionDirect:
		res.direct = true
		res.newURI = newURI(r, req)
		if r.kind == actionRedirect && (r.redirect.GetPrefixRewrite() != "" || r.redirect.GetRegexRewrite() != nil) && readsRequest {
			return res, errors.New("a redirect's path rewrite of the request headers is not modelled")
		}
		lr := localReply(directResponseOf(r))
		res.code = uint32(lr.Status)
		for k, vs := range lr.Headers {
			resp[k] = append(resp[k], vs...)
		}
		r.respHeaders.apply(resp)
	default:
		res.routeEntry = true
		sel := routeSel{r: r}
		res.cluster = r.cluster
		if r.kind == actionWeighted {
			sel.wc = r.weightedAt(in.RandomValue)
			res.cluster = sel.wc.name
		}
		res.vhost = vh.name
		sel.finalizeRequest(req)
		res.pathRewrite, res.hostRewrite = req.Path, req.Authority
		sel.finalizeResponseHeaders(resp)
	}
	res.request = headerView{":authority": {req.Authority}, ":path": {req.Path}, ":method": {req.Method}, ":scheme": {req.Scheme}}
	for k, vs := range req.Headers {
		res.request[strings.ToLower(k)] = vs
	}
	res.response = headerView{}
	if res.direct {
		res.response[":status"] = []string{strconv.Itoa(int(res.code))}
	}
	for k, vs := range resp {
		res.response[strings.ToLower(k)] = vs
	}
	return res, nil
}

// judge is the tool's checkers (compareCluster ... compareResponseHeaderFields):
// the failed checks, how many of them are response_header_matches, or an
// error for a check this harness cannot judge.
func judge(c *validationCheck, got toolResult) (failed []string, rhmFailed int, err error) {
	str := func(name string, want *string, actual string) {
		if want != nil && *want != actual {
			failed = append(failed, fmt.Sprintf("%s: expected [%s], actual [%s]", name, *want, actual))
		}
	}
	ifEntry := func(s string) string {
		if got.routeEntry {
			return s
		}
		return ""
	}
	ifDirect := func(s string) string {
		if got.direct {
			return s
		}
		return ""
	}
	str("cluster_name", c.ClusterName, ifEntry(got.cluster))
	// Virtual clusters are refused when checked: none is ever matched.
	str("virtual_cluster_name", c.VirtualClusterName, "")
	str("virtual_host_name", c.VirtualHostName, ifEntry(got.vhost))
	str("path_rewrite", c.PathRewrite, ifEntry(got.pathRewrite))
	str("host_rewrite", c.HostRewrite, ifEntry(got.hostRewrite))
	str("path_redirect", c.PathRedirect, ifDirect(got.newURI))
	if c.CodeRedirect != nil && *c.CodeRedirect != got.code {
		failed = append(failed, fmt.Sprintf("code_redirect: expected [%d], actual [%d]", *c.CodeRedirect, got.code))
	}
	matches := func(kind string, ms []*routev3.HeaderMatcher, h headerView) int {
		n := 0
		for _, m := range ms {
			ok, jerr := matchesJudged(m, h)
			if jerr != nil {
				err = errors.Join(err, fmt.Errorf("%s: %w", kind, jerr))
				continue
			}
			if !ok {
				n++
				failed = append(failed, fmt.Sprintf("%s: %s does not match %s", kind, m, strings.Join(h[strings.ToLower(m.GetName())], ",")))
			}
		}
		return n
	}
	fields := func(kind string, fs []*corev3.HeaderValue, h headerView) {
		for _, f := range fs {
			actual := ""
			if vs := h[strings.ToLower(f.GetKey())]; len(vs) > 0 {
				actual = vs[0]
			}
			str(kind+" "+f.GetKey(), &f.Value, actual)
		}
	}
	matches("request_header_matches", c.requestHeaderMatches, got.request)
	fields("request_header_fields", c.requestHeaderFields, got.request)
	rhmFailed = matches("response_header_matches", c.responseHeaderMatches, got.response)
	fields("response_header_fields", c.responseHeaderFields, got.response)
	return failed, rhmFailed, err
}
