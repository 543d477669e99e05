// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package traffic

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Result is what one request through the Gateway gave: the client's view
// and the EPP's answer as the recording proxy saw it.
type Result struct {
	N      int    // request number, from 1
	Status int    // HTTP status; 0 with Err
	Err    error  // transport error
	Pod    string // x-inference-pod: the model-server pod that answered
	Port   string // x-inference-port
	Addr   string // the answering pod's ip:port (from its name)
	// Pick is the EPP's pick: envoy.lb / x-gateway-destination-endpoint in
	// the dynamic metadata of the EPP's answer ("" when it gave none).
	Pick string
	// PickPod names the pod at Pick ("" when no pod has that address).
	PickPod string
	// Stream is the EPP stream's end as the recording proxy saw it, such as
	// "OK" or "Unavailable: ..." ("" when no stream reached it).
	Stream string
}

// PickLine is the line printed for a request sent while the EPP runs:
//
//	request 1: 200, answered by <pod> (<ip:port>); EPP picked <pod> (<ip:port>)
//
// It reports an error when the request did not land, with a 200, on the pod
// the EPP picked.
func PickLine(r Result) (string, error) {
	if r.Err != nil {
		return fmt.Sprintf("request %d: no response: %v", r.N, r.Err), fmt.Errorf("request %d: %w", r.N, r.Err)
	}
	pick := "nothing (" + orNone(r.Stream, "no EPP stream") + ")"
	if r.Pick != "" {
		pick = fmt.Sprintf("%s (%s)", orNone(r.PickPod, "no pod"), r.Pick)
	}
	line := fmt.Sprintf("request %d: %d, answered by %s (%s); EPP picked %s", r.N, r.Status, orNone(r.Pod, "no pod"), orNone(r.Addr, "-"), pick)
	switch {
	case r.Status != 200:
		return line, fmt.Errorf("request %d: status %d, want 200", r.N, r.Status)
	case r.Pick == "":
		return line, fmt.Errorf("request %d: the EPP gave no pick", r.N)
	case r.Pod == "" || r.Pod != r.PickPod || r.Addr != r.Pick:
		return line, fmt.Errorf("request %d: answered by %s (%s), but the EPP picked %s (%s)", r.N, r.Pod, r.Addr, r.PickPod, r.Pick)
	}
	return line, nil
}

// FallbackLine is the line printed for the request sent with the EPP
// stopped:
//
//	request 4 (EPP stopped): 200, answered by <pod> (<ip:port>); FailOpen fallback: ...
//
// fallbacks is how many override_host fallback picks the data plane counted
// for it (-1 when the data plane cannot say: real Envoy). It reports an
// error unless a pool pod answered 200 with no pick from the EPP, and (when
// known) the data plane counted one fallback pick.
func FallbackLine(r Result, fallbacks int64) (string, error) {
	head := fmt.Sprintf("request %d (EPP stopped)", r.N)
	if r.Err != nil {
		return head + ": no response: " + r.Err.Error(), fmt.Errorf("%s: %w", head, r.Err)
	}
	count := "the data plane's override_host fallback picks for it: " + strconv.FormatInt(fallbacks, 10)
	if fallbacks < 0 {
		count = "real Envoy: the fallback count is in its admin /stats"
	}
	line := fmt.Sprintf("%s: %d, answered by %s (%s); FailOpen fallback: the EPP gave no pick (EPP stream: %s), %s",
		head, r.Status, orNone(r.Pod, "no pod"), orNone(r.Addr, "-"), orNone(r.Stream, "none"), count)
	switch {
	case r.Status != 200 || r.Pod == "":
		return line, fmt.Errorf("%s: status %d from pod %q, want a 200 from a pool pod through the fallback", head, r.Status, r.Pod)
	case r.Pick != "":
		return line, fmt.Errorf("%s: the EPP still picked %s", head, r.Pick)
	case fallbacks >= 0 && fallbacks != 1:
		return line, fmt.Errorf("%s: the data plane counted %d fallback picks, want 1", head, fallbacks)
	}
	return line, nil
}

// EPPLine is the line printed for the EPP pod:
//
//	<pod> <ip:port> EPP: lwepp <version> (GIE <version> cmd/lwepp), the image the seed names: <image>; TLS, self-signed
//
// It reports an error unless image is lwepp at version (the tag of
// registry.k8s.io/gateway-api-inference-extension/lwepp:<version>): the demo
// runs what the seed's Deployment names, or says it cannot.
func EPPLine(pod, addr, image, version string) (string, error) {
	line := fmt.Sprintf("   %-36s %-17s EPP: lwepp %s (GIE %s cmd/lwepp), the image the seed names: %s; TLS, self-signed",
		pod, addr, version, version, orNone(image, "none"))
	name, tag, _ := strings.Cut(image[strings.LastIndexByte(image, '/')+1:], ":")
	if name != "lwepp" || tag != version {
		return line, fmt.Errorf("the seed's EPP Deployment names the image %q; this demo runs lwepp %s (hack/epp-binaries.sh)", image, version)
	}
	return line, nil
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

var (
	pickRE     = regexp.MustCompile(`^request (\d+): (\d{3}), answered by (\S+) \((\S+)\); EPP picked (\S+) \((\S+)\)$`)
	fallbackRE = regexp.MustCompile(`^request (\d+) \(EPP stopped\): 200, answered by (\S+) \((\S+)\); FailOpen fallback: the EPP gave no pick \(EPP stream: [^)]*\), (the data plane's override_host fallback picks for it: 1|real Envoy: .*)$`)
	planeRE    = regexp.MustCompile(`^data plane: (the project's Envoy stand-in|Envoy) .*architecture/dataplane\.md`)
	eppRE      = regexp.MustCompile(`^   \S+ +\S+ +EPP: lwepp (v\S+) \(GIE (v\S+) cmd/lwepp\), the image the seed names: \S+/lwepp:(v\S+); TLS`)
)

// CheckOutput checks the demo's output shape: the EPP pod's line naming
// lwepp at the version of the image the seed names; the data plane named
// with a pointer to architecture/dataplane.md; at least wantPicks requests,
// each a
// 200 answered by the pod the EPP picked (same pod and address); then one
// request with the EPP stopped, a 200 from a pod of the pool through the
// FailOpen fallback (one fallback pick counted, under the stand-in); and
// the closing line saying everything was stopped.
func CheckOutput(out string, wantPicks int) error {
	var (
		errs     []error
		plane    bool
		eppOK    bool
		picks    int
		fallback string
		stopped  bool
	)
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case planeRE.MatchString(line):
			plane = true
		case strings.Contains(line, " EPP: "):
			m := eppRE.FindStringSubmatch(line)
			switch {
			case m == nil:
				errs = append(errs, fmt.Errorf("an EPP line that does not name lwepp and the seed's image: %q", line))
			case m[1] != m[2] || m[1] != m[3]:
				errs = append(errs, fmt.Errorf("the EPP run (lwepp %s, GIE %s) is not the seed's image (lwepp:%s): %q", m[1], m[2], m[3], line))
			default:
				eppOK = true
			}
		case strings.HasPrefix(line, "request "):
			if m := pickRE.FindStringSubmatch(line); m != nil {
				switch {
				case fallback != "":
					errs = append(errs, fmt.Errorf("a picked request after the fallback request: %q", line))
				case m[2] != "200":
					errs = append(errs, fmt.Errorf("status %s, want 200: %q", m[2], line))
				case m[3] != m[5] || m[4] != m[6]:
					errs = append(errs, fmt.Errorf("answered by %s (%s) but the EPP picked %s (%s): %q", m[3], m[4], m[5], m[6], line))
				default:
					picks++
				}
				continue
			}
			if m := fallbackRE.FindStringSubmatch(line); m != nil && fallback == "" {
				fallback = m[2]
				continue
			}
			errs = append(errs, fmt.Errorf("request line of no expected shape: %q", line))
		case strings.HasPrefix(line, "stopped everything"):
			stopped = true
		}
	}
	if !eppOK {
		errs = append(errs, errors.New("no EPP line naming lwepp at the version of the seed's image"))
	}
	if !plane {
		errs = append(errs, errors.New(`no "data plane: ..." line naming the data plane and architecture/dataplane.md`))
	}
	if picks < wantPicks {
		errs = append(errs, fmt.Errorf("%d requests answered by the pod the EPP picked, want %d", picks, wantPicks))
	}
	if fallback == "" {
		errs = append(errs, errors.New("no FailOpen fallback request answered 200 with the EPP stopped"))
	}
	if !stopped {
		errs = append(errs, errors.New(`no closing "stopped everything" line`))
	}
	return errors.Join(errs...)
}
