// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	setmetadatav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_metadata/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"
)

// This file reads Envoy's route table check tool corpus
// (test/tools/router_check/test/config in Envoy, copied with its provenance
// into testdata/envoy-router-check) and
// holds the tool's own judgement of one check: the test file schema of
// test/tools/router_check/validation.proto, and RouterCheckTool's
// matchHeaderField (test/tools/router_check/router.cc). Running a test
// against the stand-in is router_check_test.go.

// corpusDir is the corpus folder, the package's
// testdata/envoy-router-check (a copy of
// ../shared/reference/envoy-router-check, so that a fresh clone runs it;
// PROVENANCE.md there).
const corpusDir = "testdata/envoy-router-check"

// gitBlobID is the id git gives a file's content (git hash-object).
func gitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// provenanceBlobs is the file table of PROVENANCE.md: each of Envoy's
// files and its git blob id at the Envoy commit it names.
func provenanceBlobs(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "PROVENANCE.md"))
	if err != nil {
		return nil, err
	}
	row := regexp.MustCompile(`(?m)^\| ([^ |]+) \| ([0-9a-f]{40}) \|$`)
	blobs := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		blobs[m[1]] = m[2]
	}
	if lic := regexp.MustCompile("`LICENSE` here is Envoy's, blob" + `\s+` + "`([0-9a-f]{40})`").FindStringSubmatch(string(b)); lic != nil {
		blobs["LICENSE"] = lic[1]
	}
	return blobs, nil
}

// corpusPair is one line of pairs.tsv: a route configuration, a test file,
// and what Envoy's tool reports for them.
type corpusPair struct {
	config, tests string
	// failResponseHeaderMatches is the outcome
	// "response-header-matches-fail": every response_header_matches entry
	// of every test fails and every other check passes
	// (router_test.cc RouterCheckTestRoutesFailuresTest); otherwise every
	// check passes ("pass").
	failResponseHeaderMatches bool
}

func readPairs(dir string) ([]corpusPair, error) {
	b, err := os.ReadFile(filepath.Join(dir, "pairs.tsv"))
	if err != nil {
		return nil, err
	}
	var pairs []corpusPair
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 3 {
			return nil, fmt.Errorf("pairs.tsv:%d: want config, tests and outcome separated by tabs", n)
		}
		p := corpusPair{config: f[0], tests: f[1]}
		switch f[2] {
		case "pass":
		case "response-header-matches-fail":
			p.failResponseHeaderMatches = true
		default:
			return nil, fmt.Errorf("pairs.tsv:%d: unknown outcome %q", n, f[2])
		}
		pairs = append(pairs, p)
	}
	if len(pairs) == 0 {
		return nil, errors.New("pairs.tsv names no pair")
	}
	return pairs, sc.Err()
}

// loadRouteConfig reads a route configuration as the tool does
// (TestUtility::loadFromFile: YAML, converted to JSON, into
// envoy.config.route.v3.RouteConfiguration; an unknown field is an
// error).
func loadRouteConfig(path string) (*routev3.RouteConfiguration, error) {
	j, err := readAsJSON(path)
	if err != nil {
		return nil, err
	}
	rc := &routev3.RouteConfiguration{}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if j, err = json.Marshal(durationObjects(v, rc.ProtoReflect().Descriptor())); err != nil {
		return nil, err
	}
	if err := protojson.Unmarshal(j, rc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rc, nil
}

// durationObjects rewrites, in a decoded JSON value of message md, every
// google.protobuf.Duration written as an object ({seconds: 30},
// {nanos: 0}, as ClusterHeader.yaml and TestRoutes.yaml do and Envoy's
// JSON loader accepts) into the string form protojson reads ("30s").
func durationObjects(v any, md protoreflect.MessageDescriptor) any {
	if md.FullName() == "google.protobuf.Duration" {
		o, ok := v.(map[string]any)
		if !ok {
			return v
		}
		num := func(k string) int64 {
			switch n := o[k].(type) {
			case float64:
				return int64(n)
			case string:
				i, _ := strconv.ParseInt(n, 10, 64)
				return i
			}
			return 0
		}
		return fmt.Sprintf("%d.%09ds", num("seconds"), num("nanos"))
	}
	o, ok := v.(map[string]any)
	if !ok || md.FullName() == "google.protobuf.Struct" || md.FullName() == "google.protobuf.Any" {
		return v
	}
	for k, fv := range o {
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			fd = md.Fields().ByTextName(k)
		}
		switch {
		case fd == nil:
		case fd.IsMap() && fd.MapValue().Message() != nil:
			if m, ok := fv.(map[string]any); ok {
				for mk, mv := range m {
					m[mk] = durationObjects(mv, fd.MapValue().Message())
				}
			}
		case fd.Message() != nil && fd.IsList():
			if l, ok := fv.([]any); ok {
				for i := range l {
					l[i] = durationObjects(l[i], fd.Message())
				}
			}
		case fd.Message() != nil:
			o[k] = durationObjects(fv, fd.Message())
		}
	}
	return o
}

// readAsJSON reads a YAML or JSON file as JSON (JSON is YAML; the YAML
// reader also takes the trailing commas TestRoutes.golden.proto.json has).
func readAsJSON(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return j, nil
}

// validation is envoy.RouterCheckToolSchema.Validation
// (test/tools/router_check/validation.proto), snake_case field names as
// the corpus writes them; proto-typed fields are decoded with protojson.
type validation struct {
	Tests []validationItem `json:"tests"`
}

type validationItem struct {
	TestName string          `json:"test_name"`
	Input    validationInput `json:"input"`
	Validate validationCheck `json:"validate"`
}

type validationInput struct {
	Authority   string `json:"authority"`
	Path        string `json:"path"`
	Method      string `json:"method"`
	RandomValue uint64 `json:"random_value"`
	SSL         bool   `json:"ssl"`
	Internal    bool   `json:"internal"`
	Runtime     string `json:"runtime"`

	RawRequestHeaders  []json.RawMessage `json:"additional_request_headers"`
	RawResponseHeaders []json.RawMessage `json:"additional_response_headers"`
	RawDynamicMetadata []json.RawMessage `json:"dynamic_metadata"`

	requestHeaders, responseHeaders []*corev3.HeaderValue
	dynamicMetadata                 []*setmetadatav3.Metadata
}

// validationCheck is ValidationAssert: a nil string or code is a check
// the test does not make ("" is a check that expects nothing).
type validationCheck struct {
	ClusterName        *string `json:"cluster_name"`
	VirtualClusterName *string `json:"virtual_cluster_name"`
	VirtualHostName    *string `json:"virtual_host_name"`
	HostRewrite        *string `json:"host_rewrite"`
	PathRewrite        *string `json:"path_rewrite"`
	PathRedirect       *string `json:"path_redirect"`
	CodeRedirect       *uint32 `json:"code_redirect"`

	RawRequestHeaderFields  []json.RawMessage `json:"request_header_fields"`
	RawResponseHeaderFields []json.RawMessage `json:"response_header_fields"`
	RawRequestHeaderMatches []json.RawMessage `json:"request_header_matches"`
	RawResponseHeaderMatch  []json.RawMessage `json:"response_header_matches"`

	requestHeaderFields, responseHeaderFields   []*corev3.HeaderValue
	requestHeaderMatches, responseHeaderMatches []*routev3.HeaderMatcher
}

// loadValidation reads a test file and checks it as the tool does
// (TestUtility::validate of validation.proto's rules).
func loadValidation(path string) (*validation, error) {
	j, err := readAsJSON(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	v := &validation{}
	if err := dec.Decode(v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(v.Tests) == 0 {
		return nil, fmt.Errorf("%s: no tests", path)
	}
	for i := range v.Tests {
		it := &v.Tests[i]
		in, c := &it.Input, &it.Validate
		switch {
		case it.TestName == "":
			err = errors.New("test_name is empty")
		case in.Authority == "" || in.Path == "" || len(in.Method) < 3:
			err = errors.New("input needs authority, path and a method of 3 characters or more")
		}
		for _, d := range []error{
			decodeProtos(in.RawRequestHeaders, &in.requestHeaders),
			decodeProtos(in.RawResponseHeaders, &in.responseHeaders),
			decodeProtos(in.RawDynamicMetadata, &in.dynamicMetadata),
			decodeProtos(c.RawRequestHeaderFields, &c.requestHeaderFields),
			decodeProtos(c.RawResponseHeaderFields, &c.responseHeaderFields),
			decodeProtos(c.RawRequestHeaderMatches, &c.requestHeaderMatches),
			decodeProtos(c.RawResponseHeaderMatch, &c.responseHeaderMatches),
		} {
			err = errors.Join(err, d)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: test %q: %w", path, it.TestName, err)
		}
	}
	return v, nil
}

// decodeProtos decodes each JSON message into a new T.
func decodeProtos[T any, PT interface {
	*T
	proto.Message
}](raw []json.RawMessage, out *[]PT) error {
	for _, r := range raw {
		m := PT(new(T))
		if err := protojson.Unmarshal(r, m); err != nil {
			return err
		}
		*out = append(*out, m)
	}
	return nil
}

// headerView is a header map as the tool reads it: lower-case names, the
// pseudo-headers among them, values in the order they were added.
type headerView map[string][]string

// matchesJudged is RouterCheckTool::matchHeaderField's judgement:
// HeaderUtility::createHeaderData(m)->matchesHeaders(h)
// (source/common/http/header_utility.{h,cc}), here on the values joined
// with ",": an appended inline header such as content-type is one
// comma-joined value in Envoy's header map (HeaderMapImpl appends to the
// existing entry), which the corpus's "Direct Response custom
// content-type appended" shows by matching "text/plain,application/json"
// exactly; trying each value of http.Header on its own fails that test,
// and no corpus test repeats a header Envoy keeps apart. A missing
// header fails every value matcher unless treat_missing_header_as_empty;
// a presence matcher (present_match, or no specifier at all) compares
// presence with present_match, inverted by invert_match. An error is a
// matcher this judge does not know, the deprecated exact_match ...
// safe_regex_match among them (no corpus test uses them).
func matchesJudged(m *routev3.HeaderMatcher, h headerView) (bool, error) {
	vals, ok := h[strings.ToLower(m.GetName())]
	ok = ok && len(vals) > 0
	value := strings.Join(vals, ",")
	present := func(want bool) bool {
		if !ok && !m.GetTreatMissingHeaderAsEmpty() {
			return m.GetInvertMatch() == want
		}
		return want != m.GetInvertMatch()
	}
	var match func(string) (bool, error)
	switch s := m.GetHeaderMatchSpecifier().(type) {
	case nil:
		return present(true), nil
	case *routev3.HeaderMatcher_PresentMatch:
		return present(s.PresentMatch), nil
	case *routev3.HeaderMatcher_StringMatch:
		match = func(v string) (bool, error) { return judgeString(s.StringMatch, v) }
	case *routev3.HeaderMatcher_RangeMatch:
		match = func(v string) (bool, error) {
			n, err := strconv.ParseInt(v, 10, 64)
			return err == nil && n >= s.RangeMatch.GetStart() && n < s.RangeMatch.GetEnd(), nil
		}
	default:
		return false, fmt.Errorf("header matcher %T", s)
	}
	if !ok && !m.GetTreatMissingHeaderAsEmpty() {
		return false, nil
	}
	got, err := match(value)
	return got != m.GetInvertMatch(), err
}

// judgeString is Matchers::StringMatcherImpl::match
// (source/common/common/matchers.cc).
func judgeString(sm *matcherv3.StringMatcher, v string) (bool, error) {
	fold := func(s string) string {
		if sm.GetIgnoreCase() {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return fold(v) == fold(p.Exact), nil
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(fold(v), fold(p.Prefix)), nil
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(fold(v), fold(p.Suffix)), nil
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(fold(v), fold(p.Contains)), nil
	case *matcherv3.StringMatcher_SafeRegex:
		return judgeRegex(p.SafeRegex.GetRegex(), v)
	}
	return false, fmt.Errorf("string matcher %T", sm.GetMatchPattern())
}

// judgeRegex is a google_re2 full match.
func judgeRegex(pattern, v string) (bool, error) {
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return false, err
	}
	return re.MatchString(v), nil
}
