// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// bindMount is one of a container's volumeMounts: the volume's folder on the
// host (writeVolumes) at the mount path the process sees.
type bindMount struct {
	src, dst string
	readOnly bool
}

// containerMounts resolves c's volumeMounts against the pod's written
// volumes; the kube-api-access mount is skipped (credentials.go).
func containerMounts(pod *corev1.Pod, c *corev1.Container, volumes map[string]string) ([]bindMount, error) {
	var out []bindMount
	for _, m := range c.VolumeMounts {
		if isServiceAccountMount(pod, m) {
			continue
		}
		src, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s: no volume of that name was written", m.Name)
		}
		out = append(out, bindMount{src: src, dst: m.MountPath, readOnly: m.ReadOnly})
	}
	return out, nil
}

// runMounted is run with the container's mounts: on an OS thread switched
// into the pod's network namespace and into a new mount namespace of its
// own (unshare(CLONE_NEWNS), which also unshares the thread's filesystem
// attributes), with propagation private, so nothing mounted here is seen
// by the host or another container, and each mount bind-mounted (read-only
// when asked). A process fn starts from this thread is born in both
// namespaces. The thread is never returned to the Go runtime, since its
// mount namespace cannot be undone: it stays locked, parked until hold is
// closed (the process has exited: the process's Pdeathsig fires when the
// thread that forked it ends), then ends with its goroutine. A mount path missing on the host is created there (an empty
// folder: processes share the host's filesystem; architecture/node.md).
func (s *sandbox) runMounted(mounts []bindMount, hold <-chan struct{}, fn func() error) error {
	if len(mounts) == 0 {
		return s.run(fn)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		err := s.enterAndMount(mounts, fn)
		errc <- err
		if err == nil {
			<-hold
		}
	}()
	return <-errc
}

func (s *sandbox) enterAndMount(mounts []bindMount, fn func() error) error {
	target, err := os.Open(filepath.Join(netnsRunDir, s.netns))
	if err != nil {
		return fmt.Errorf("node: netns %s: %w", s.netns, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("node: enter netns %s: %w", s.netns, err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("node: new mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("node: make mounts private: %w", err)
	}
	var errs []error
	for _, m := range mounts {
		errs = append(errs, bind(m))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return fn()
}

func bind(m bindMount) error {
	if err := os.MkdirAll(m.dst, 0o755); err != nil {
		return fmt.Errorf("node: mount path %s: %w", m.dst, err)
	}
	if err := unix.Mount(m.src, m.dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("node: bind %s at %s: %w", m.src, m.dst, err)
	}
	if m.readOnly {
		if err := unix.Mount("", m.dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("node: read-only %s: %w", m.dst, err)
		}
	}
	return nil
}
