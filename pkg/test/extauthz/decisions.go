// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extauthz

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
)

// Decisions counts the checks the server answered, by check API and
// verdict, as it logs them: one line per check, holding "[gRPCv3][allowed]",
// "[gRPCv2][denied]", "[HTTP][allowed]" and so on.
type Decisions struct {
	GRPCAllowed, GRPCDenied int // v3 and v2 together
	HTTPAllowed, HTTPDenied int
}

// Total is every check counted.
func (d Decisions) Total() int { return d.GRPCAllowed + d.GRPCDenied + d.HTTPAllowed + d.HTTPDenied }

// Sub is d minus e: the checks answered between two readings.
func (d Decisions) Sub(e Decisions) Decisions {
	return Decisions{GRPCAllowed: d.GRPCAllowed - e.GRPCAllowed, GRPCDenied: d.GRPCDenied - e.GRPCDenied,
		HTTPAllowed: d.HTTPAllowed - e.HTTPAllowed, HTTPDenied: d.HTTPDenied - e.HTTPDenied}
}

// logMax bounds the output kept for a failing test's log.
const logMax = 1 << 20

// output is the io.Writer of the child's stdout and stderr: it counts the
// decisions of complete lines and keeps the last logMax bytes. Safe for
// concurrent use.
type output struct {
	mu      sync.Mutex
	partial []byte // the current line, not yet ended
	kept    []byte
	dropped int
	counts  Decisions
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kept = append(o.kept, b...)
	if over := len(o.kept) - logMax; over > 0 {
		o.dropped += over
		o.kept = append(o.kept[:0], o.kept[over:]...)
	}
	o.partial = append(o.partial, b...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		o.count(string(o.partial[:i]))
		o.partial = o.partial[i+1:]
	}
	return len(b), nil
}

// count counts line's decision, if it logs one. The marker sits at the
// start of the message, after the log package's date and time.
func (o *output) count(line string) {
	for _, m := range []struct {
		marker string
		n      *int
	}{
		{"[gRPCv3][allowed]", &o.counts.GRPCAllowed}, {"[gRPCv2][allowed]", &o.counts.GRPCAllowed},
		{"[gRPCv3][denied]", &o.counts.GRPCDenied}, {"[gRPCv2][denied]", &o.counts.GRPCDenied},
		{"[HTTP][allowed]", &o.counts.HTTPAllowed}, {"[HTTP][denied]", &o.counts.HTTPDenied},
	} {
		if i := strings.Index(line, m.marker); i >= 0 && i < 40 {
			*m.n++
			return
		}
	}
}

func (o *output) decisions() Decisions {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dropped == 0 {
		return string(o.kept)
	}
	return "(first " + strconv.Itoa(o.dropped) + " bytes cut)\n" + string(o.kept)
}
