// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	vkapi "github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// Container logs are kept as a container runtime keeps them for the
// kubelet: one file per container run, each line in the CRI log format
// (the kubelet's pkg/kubelet/kuberuntime/logs): "<RFC 3339 nano UTC time>
// <stdout|stderr> <F|P> <text>", where F ends a line and P is a part of one
// longer than maxLogLine. The time is when the line was read from the
// process, which is what `kubectl logs --since-time` filters on.

const maxLogLine = 16 << 10 // containerd's default partial-line size

// containerOutput is the two pipes of a container run and the log file
// their lines go to.
type containerOutput struct {
	stdout, stderr *os.File // the write ends, for the child
	readOut        *os.File
	readErr        *os.File
	file           *os.File
	mu             sync.Mutex // one line at a time into file
}

func newContainerOutput(logPath string) (*containerOutput, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("container log: %w", err)
	}
	o := &containerOutput{file: f}
	if o.readOut, o.stdout, err = os.Pipe(); err != nil {
		f.Close()
		return nil, fmt.Errorf("container log: %w", err)
	}
	if o.readErr, o.stderr, err = os.Pipe(); err != nil {
		f.Close()
		o.readOut.Close()
		o.stdout.Close()
		return nil, fmt.Errorf("container log: %w", err)
	}
	return o, nil
}

// start closes the parent's write ends and copies both streams into the
// log file until every writer has gone; the channel closes then.
func (o *containerOutput) start() <-chan struct{} {
	o.stdout.Close()
	o.stderr.Close()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); o.copy(o.readOut, "stdout") }()
	go func() { defer wg.Done(); o.copy(o.readErr, "stderr") }()
	go func() {
		wg.Wait()
		o.file.Close()
		close(done)
	}()
	return done
}

func (o *containerOutput) copy(r *os.File, stream string) {
	defer r.Close()
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			tag := "P"
			if line[len(line)-1] == '\n' {
				tag, line = "F", line[:len(line)-1]
			} else if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				tag = "F" // the stream ended without a newline
			}
			o.write(stream, tag, line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func (o *containerOutput) write(stream, tag string, text []byte) {
	var b bytes.Buffer
	b.WriteString(time.Now().UTC().Format(time.RFC3339Nano))
	b.WriteString(" " + stream + " " + tag + " ")
	b.Write(text)
	b.WriteByte('\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.file.Write(b.Bytes())
}

// criLine is one parsed line of a log file.
type criLine struct {
	time    time.Time
	stream  string
	partial bool
	text    string
}

func parseCRILine(s string) (criLine, bool) {
	ts, rest, ok := strings.Cut(s, " ")
	if !ok {
		return criLine{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return criLine{}, false
	}
	stream, rest, ok := strings.Cut(rest, " ")
	if !ok {
		return criLine{}, false
	}
	tag, text, ok := strings.Cut(rest, " ")
	if !ok {
		return criLine{}, false
	}
	return criLine{time: t, stream: stream, partial: tag == "P", text: text}, true
}

// containerLogs is the kubelet's GetContainerLogs for virtual-kubelet's
// log handler: the current run's log of a container (the previous run's
// with Previous), as `kubectl logs` gets it through the API server. Lines
// are whole (partial parts joined); SinceSeconds/SinceTime keep lines read
// at or after that time; Tail keeps the last lines; Timestamps prefixes
// each line with its time; LimitBytes cuts the output; Follow keeps
// streaming while the run goes on.
func (n *provider) containerLogs(ctx context.Context, namespace, name, containerName string, opts vkapi.ContainerLogOpts) (io.ReadCloser, error) {
	n.mu.Lock()
	pr := n.pods[podKey(namespace, name)]
	n.mu.Unlock()
	if pr == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	pr.mu.Lock()
	var c *container
	for _, cc := range pr.containers {
		if cc.spec.Name == containerName {
			c = cc
		}
	}
	if c == nil {
		pr.mu.Unlock()
		return nil, errdefs.NotFoundf("container %s is not in pod %s/%s", containerName, namespace, name)
	}
	run, proc := c.restarts, c.proc
	if opts.Previous {
		// The run LastTerminationState describes, as the kubelet answers
		// --previous: during a restart back-off that is the run that just
		// ended (its restart count is not yet incremented).
		if c.last.Terminated == nil {
			pr.mu.Unlock()
			return nil, errdefs.InvalidInputf("previous terminated container %s in pod %s/%s not found", containerName, namespace, name)
		}
		run, proc = c.lastRun, nil
	}
	path := n.logPath(pr.pod, containerName, run)
	pr.mu.Unlock()

	since := opts.SinceTime
	if opts.SinceSeconds > 0 {
		since = time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second)
	}
	format := func(l criLine) string {
		if opts.Timestamps {
			return l.time.Format(time.RFC3339Nano) + " " + l.text
		}
		return l.text
	}
	var lines []string
	f, err := os.Open(path)
	if err != nil {
		return nil, errdefs.NotFoundf("container %s in pod %s/%s has no log yet", containerName, namespace, name)
	}
	r := &logReader{f: f, since: since}
	for l, ok := r.next(); ok; l, ok = r.next() {
		lines = append(lines, format(l)+"\n")
	}
	// Tail 0 is virtual-kubelet's "not given" as well as tailLines=0, so it
	// keeps every line.
	if opts.Tail > 0 && len(lines) > opts.Tail {
		lines = lines[len(lines)-opts.Tail:]
	}
	pipeR, pipeW := io.Pipe()
	go func() {
		defer f.Close()
		limit := opts.LimitBytes
		// emit writes s, cut at LimitBytes; false once nothing more may go.
		emit := func(s string) bool {
			if opts.LimitBytes > 0 {
				if len(s) > limit {
					s = s[:limit]
				}
				limit -= len(s)
			}
			if _, err := io.WriteString(pipeW, s); err != nil {
				return false
			}
			return opts.LimitBytes <= 0 || limit > 0
		}
		// drain emits every whole line read since the last call; false
		// once nothing more may go.
		drain := func() bool {
			for l, ok := r.next(); ok; l, ok = r.next() {
				if !emit(format(l) + "\n") {
					return false
				}
			}
			return true
		}
		for _, s := range lines {
			if !emit(s) {
				pipeW.Close()
				return
			}
		}
		if !opts.Follow || proc == nil {
			pipeW.Close()
			return
		}
		// Follow: poll the file for new lines until the run's output has
		// ended and been read, or the caller goes away.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for drain() {
			select {
			case <-proc.done:
				// The run ended; its output ends once every holder of the
				// pipes has (a child that left the process group may keep
				// them open: give up on it after a second).
				select {
				case <-proc.logged:
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
				drain()
				pipeW.Close()
				return
			case <-ctx.Done():
				pipeW.CloseWithError(ctx.Err())
				return
			case <-tick.C:
			}
		}
		pipeW.Close()
	}()
	return pipeR, nil
}

// logReader reads whole lines of a log file that is still being written:
// a line without its newline yet is kept for the next call.
type logReader struct {
	f       *os.File
	since   time.Time
	pending string            // a read line's start without its newline
	part    map[string]string // per stream: partial (P) texts of the line being joined
}

func (r *logReader) next() (criLine, bool) {
	var buf [32 << 10]byte
	for {
		if i := strings.IndexByte(r.pending, '\n'); i >= 0 {
			raw := r.pending[:i]
			r.pending = r.pending[i+1:]
			l, ok := parseCRILine(raw)
			if !ok {
				continue
			}
			// Parts join within their stream: stdout's and stderr's lines
			// interleave in the file.
			if r.part == nil {
				r.part = map[string]string{}
			}
			if l.partial {
				r.part[l.stream] += l.text
				continue
			}
			l.text = r.part[l.stream] + l.text
			delete(r.part, l.stream)
			if !r.since.IsZero() && l.time.Before(r.since) {
				continue
			}
			return l, true
		}
		n, err := r.f.Read(buf[:])
		r.pending += string(buf[:n])
		if n == 0 || err != nil {
			return criLine{}, false
		}
	}
}
