// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is one control-plane binary run as a child process, with stdout and
// stderr appended to a log file that outlives restarts. Not safe for concurrent
// use: the Env calls it from the test goroutine and its cleanup.
type process struct {
	name    string
	path    string
	args    []string
	logPath string
	run     *run // nil when not started or stopped
}

// run is one incarnation of a process.
type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // cmd.Wait's result, readable after done
}

// start runs the binary. The child gets its own process group, and the kernel
// kills it (SIGKILL) if the test binary dies without running its cleanups.
func (p *process) start() error {
	if p.run != nil {
		return fmt.Errorf("kubeenv: %s already running", p.name)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("kubeenv: %s log: %w", p.name, err)
	}
	defer logf.Close() // the child holds its own copy
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kubeenv: start %s: %w", p.name, err)
	}
	r := &run{cmd: cmd, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	p.run = r
	return nil
}

// exited is closed when the current incarnation exits; nil if none is running.
func (p *process) exited() <-chan struct{} {
	if p.run == nil {
		return nil
	}
	return p.run.done
}

// stop sends SIGTERM to the process group, waits up to grace, then sends
// SIGKILL; grace 0 kills at once. It returns once the process has exited, or an
// error if it survives SIGKILL for 10 s. Stopping a stopped process is a no-op.
func (p *process) stop(grace time.Duration) error {
	r := p.run
	if r == nil {
		return nil
	}
	p.run = nil
	pgid := -r.cmd.Process.Pid
	if grace > 0 {
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-r.done:
			return nil
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	select {
	case <-r.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kubeenv: %s (pid %d) survived SIGKILL for 10 s", p.name, r.cmd.Process.Pid)
	}
}

// exitError describes why the current incarnation exited, with the log's tail.
func (p *process) exitError() error {
	err := errors.New("unknown")
	if p.run != nil {
		err = p.run.err
	}
	return fmt.Errorf("kubeenv: %s exited (%v); last lines of %s:\n%s", p.name, err, p.logPath, p.logTail(8<<10))
}

// logTail returns at most the last max bytes of the log file.
func (p *process) logTail(max int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	prefix := ""
	if st.Size() > max {
		if _, err := f.Seek(st.Size()-max, io.SeekStart); err != nil {
			return fmt.Sprintf("(no log: %v)", err)
		}
		prefix = fmt.Sprintf("(first %d bytes cut)\n", st.Size()-max)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return prefix + string(b)
}
