// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// process is one run of a container: a local process started inside the
// pod's network namespace, its output appended to a log file in the CRI
// log format (logs.go).
type process struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed when the process has been waited for
	exit    int           // exit code, 128+signal when killed, valid after done
	// logged is closed once both output streams have ended and every line
	// is in the log file.
	logged <-chan struct{}
}

// startProcess starts argv with env (NAME=value) in dir inside sb, with
// mounts (mounts.go), output to logPath. The process leads its own process group, so a kill reaches any
// children it made, and it gets SIGKILL if this node's process dies.
func startProcess(sb *sandbox, argv, env []string, mounts []bindMount, dir, logPath string) (*process, error) {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	argv, env, err := withMounts(argv, env, mounts, attr)
	if err != nil {
		return nil, err
	}
	out, err := newContainerOutput(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = env, dir, out.stdout, out.stderr, attr
	err = sb.run(cmd.Start)
	// The child (and any process it starts) holds the write ends now; the
	// streams end when the last of them exits.
	logged := out.start()
	if err != nil {
		<-logged
		return nil, err
	}
	p := &process{cmd: cmd, started: time.Now(), done: make(chan struct{}), logged: logged}
	go p.wait()
	return p, nil
}

func (p *process) wait() {
	err := p.cmd.Wait()
	p.exit = 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.exit = 128 + int(ws.Signal())
		} else {
			p.exit = ee.ExitCode()
		}
	} else if err != nil {
		p.exit = 128
	}
	// Children left in the group end with their leader, as they would with
	// a container's PID 1.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	close(p.done)
}

// stop sends SIGTERM to the process, and SIGKILL to its group once grace has
// passed, and returns once it has exited.
func (p *process) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// kill sends SIGKILL to the process group at once.
func (p *process) kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }
