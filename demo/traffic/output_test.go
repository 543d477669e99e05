// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package traffic

import (
	"errors"
	"strings"
	"testing"
)

const (
	podA      = "vllm-llama3-8b-6d8f9c7b5-abcde"
	podB      = "vllm-llama3-8b-6d8f9c7b5-fghij"
	addrA     = "10.244.0.13:8000"
	addrB     = "10.244.0.14:8000"
	eppPod    = "vllm-llama3-8b-epp-5f7c9d8b6-klmno"
	eppAddr   = "10.244.0.16:9002"
	seedImage = "registry.k8s.io/gateway-api-inference-extension/lwepp:v1.6.2"
)

func TestEPPLine(t *testing.T) {
	line, err := EPPLine(eppPod, eppAddr, seedImage, "v1.6.2")
	want := "   " + eppPod + "   " + eppAddr + "  EPP: lwepp v1.6.2 (GIE v1.6.2 cmd/lwepp), the image the seed names: " + seedImage + "; TLS, self-signed"
	if line != want || err != nil {
		t.Fatalf("got %q, %v\nwant %q, nil", line, err, want)
	}
	for _, tc := range []struct{ name, image, version string }{
		{"another lwepp version", "registry.k8s.io/gateway-api-inference-extension/lwepp:v1.6.0", "v1.6.2"},
		{"the full EPP's image", "registry.k8s.io/gateway-api-inference-extension/epp:v1.6.2", "v1.6.2"},
		{"no tag", "registry.k8s.io/gateway-api-inference-extension/lwepp", "v1.6.2"},
		{"no image", "", "v1.6.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EPPLine(eppPod, eppAddr, tc.image, tc.version)
			if err == nil || !strings.Contains(err.Error(), "this demo runs lwepp "+tc.version) {
				t.Errorf("error %v, want one saying the demo runs lwepp %s", err, tc.version)
			}
		})
	}
}

func picked(n int, pod, addr, pickPod, pick string) Result {
	return Result{N: n, Status: 200, Pod: pod, Port: "8000", Addr: addr, Pick: pick, PickPod: pickPod, Stream: "OK"}
}

func TestPickLine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       Result
		want    string
		wantErr string
	}{
		{"landed on its pick", picked(1, podA, addrA, podA, addrA),
			"request 1: 200, answered by " + podA + " (" + addrA + "); EPP picked " + podA + " (" + addrA + ")", ""},
		{"another pod answered", picked(2, podB, addrB, podA, addrA),
			"request 2: 200, answered by " + podB + " (" + addrB + "); EPP picked " + podA + " (" + addrA + ")", "but the EPP picked"},
		{"no pick", Result{N: 3, Status: 200, Pod: podA, Addr: addrA, Stream: "Unavailable"},
			"request 3: 200, answered by " + podA + " (" + addrA + "); EPP picked nothing (Unavailable)", "no pick"},
		{"an error status", Result{N: 1, Status: 500, Pick: addrA, PickPod: podA, Stream: "OK"},
			"request 1: 500, answered by no pod (-); EPP picked " + podA + " (" + addrA + ")", "status 500"},
		{"a pick no pod has", picked(1, podA, addrA, "", "10.244.0.99:8000"),
			"request 1: 200, answered by " + podA + " (" + addrA + "); EPP picked no pod (10.244.0.99:8000)", "but the EPP picked"},
		{"no response", Result{N: 1, Err: errors.New("connection refused")},
			"request 1: no response: connection refused", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, err := PickLine(tc.r)
			if line != tc.want {
				t.Errorf("line\n got %q\nwant %q", line, tc.want)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestFallbackLine(t *testing.T) {
	ok := Result{N: 4, Status: 200, Pod: podB, Addr: addrB, Stream: "Unavailable"}
	line, err := FallbackLine(ok, 1)
	want := "request 4 (EPP stopped): 200, answered by " + podB + " (" + addrB + "); FailOpen fallback: the EPP gave no pick " +
		"(EPP stream: Unavailable), the data plane's override_host fallback picks for it: 1"
	if line != want || err != nil {
		t.Fatalf("got %q, %v\nwant %q, nil", line, err, want)
	}
	if line, err := FallbackLine(ok, -1); err != nil || !strings.HasSuffix(line, "real Envoy: the fallback count is in its admin /stats") {
		t.Errorf("under Envoy: %q, %v", line, err)
	}
	for _, tc := range []struct {
		name      string
		r         Result
		fallbacks int64
		wantErr   string
	}{
		{"500", Result{N: 4, Status: 500, Stream: "Unavailable"}, 0, "status 500"},
		{"still picked", Result{N: 4, Status: 200, Pod: podA, Addr: addrA, Pick: addrA, Stream: "OK"}, 0, "still picked"},
		{"no fallback counted", ok, 0, "counted 0 fallback picks"},
		{"two fallbacks counted", ok, 2, "counted 2 fallback picks"},
		{"no response", Result{N: 4, Err: errors.New("EOF")}, 0, "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FallbackLine(tc.r, tc.fallbacks)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// goodOutput is the shape Run prints, built from the line functions.
func goodOutput(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("== cluster: ...\n")
	epp, err := EPPLine(eppPod, eppAddr, seedImage, "v1.6.2")
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString(epp + "  [netns imdemo-7-16]\n")
	b.WriteString("data plane: the project's Envoy stand-in (pkg/test/dataplane, in this process), not Envoy; how it follows Envoy and where it differs: architecture/dataplane.md\n")
	b.WriteString("   booted from that ConfigMap's bootstrap, unmodified; ENVOY_BINARY=/path/to/envoy runs a real Envoy instead\n")
	for i, r := range []Result{picked(1, podA, addrA, podA, addrA), picked(2, podB, addrB, podB, addrB), picked(3, podA, addrA, podA, addrA)} {
		line, err := PickLine(r)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		b.WriteString(line + "\n")
	}
	line, err := FallbackLine(Result{N: 4, Status: 200, Pod: podB, Addr: addrB, Stream: "Unavailable"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString(line + "\n\n")
	b.WriteString("stopped everything it started (14 steps undone: ...) and deleted its 4 network namespaces\n")
	return b.String()
}

func TestCheckOutput(t *testing.T) {
	good := goodOutput(t)
	if err := CheckOutput(good, 3); err != nil {
		t.Fatalf("the demo's own shape: %v\n%s", err, good)
	}
	if err := CheckOutput(strings.ReplaceAll(good, "\n", "\r\n"), 3); err != nil {
		t.Errorf("CRLF line ends: %v", err)
	}
	envoy := strings.Replace(good, "data plane: the project's Envoy stand-in (pkg/test/dataplane, in this process), not Envoy;",
		"data plane: Envoy (/usr/local/bin/envoy, ENVOY_BINARY);", 1)
	envoy = strings.Replace(envoy, "the data plane's override_host fallback picks for it: 1", "real Envoy: the fallback count is in its admin /stats", 1)
	if err := CheckOutput(envoy, 3); err != nil {
		t.Errorf("under Envoy: %v", err)
	}
	mismatch, _ := PickLine(picked(2, podB, addrB, podA, addrA))
	for _, tc := range []struct {
		name, out, wantErr string
		picks              int
	}{
		{"too few picks", good, "3 requests answered by the pod the EPP picked, want 4", 4},
		{"a request on another pod", strings.Replace(good, "request 2: 200, answered by "+podB+" ("+addrB+"); EPP picked "+podB+" ("+addrB+")", mismatch, 1),
			"answered by " + podB + " (" + addrB + ") but the EPP picked " + podA, 3},
		{"a 503", strings.Replace(good, "request 1: 200,", "request 1: 503,", 1), "status 503, want 200", 3},
		{"no data plane line", strings.Replace(good, "data plane: ", "plane: ", 1), "no \"data plane: ...\" line", 3},
		{"no pointer to the data plane doc", strings.Replace(good, "architecture/dataplane.md", "the docs", 1), "no \"data plane: ...\" line", 3},
		{"no fallback", removeLine(good, "request 4 (EPP stopped)"), "no FailOpen fallback request", 3},
		{"fallback not counted", strings.Replace(good, "fallback picks for it: 1", "fallback picks for it: 0", 1), "request line of no expected shape", 3},
		{"fallback answered 500", strings.Replace(good, "(EPP stopped): 200,", "(EPP stopped): 500,", 1), "no FailOpen fallback request", 3},
		{"a pick after the fallback", good + "request 5: 200, answered by " + podA + " (" + addrA + "); EPP picked " + podA + " (" + addrA + ")\n",
			"a picked request after the fallback request", 3},
		{"not stopped", removeLine(good, "stopped everything"), `no closing "stopped everything" line`, 3},
		{"no EPP line", removeLine(good, "   "+eppPod), "no EPP line naming lwepp", 3},
		{"the full EPP", strings.Replace(good, "EPP: lwepp v1.6.2 (GIE v1.6.2 cmd/lwepp)", "EPP: GIE v1.0.0 full EPP (the manifest's lwepp image is not run, see below)", 1),
			"an EPP line that does not name lwepp", 3},
		{"another lwepp than the seed's", strings.Replace(good, "EPP: lwepp v1.6.2 (GIE v1.6.2", "EPP: lwepp v1.6.0 (GIE v1.6.0", 1),
			"is not the seed's image (lwepp:v1.6.2)", 3},
		{"empty", "", "want 3", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutput(tc.out, tc.picks)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func removeLine(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestNamespacesIn(t *testing.T) {
	list := "imdemo-7-13 (id: 3)\nimdemo-7-14\ngie-99 (id: 1)\n"
	got := NamespacesIn(list, []string{"imdemo-7-13", "imdemo-7-14", "imdemo-7-15", "imdemo-7-1"})
	if strings.Join(got, ",") != "imdemo-7-13,imdemo-7-14" {
		t.Errorf("got %q", got)
	}
	if got := NamespacesIn("", []string{"imdemo-7-13"}); len(got) != 0 {
		t.Errorf("empty list: got %q", got)
	}
}
