// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// bindMount is one of a container's volumeMounts: the volume's folder on the
// host (writeVolumes) at the mount path the process sees; or, with File,
// one file over another (the pod's resolv.conf, resolvconf.go).
type bindMount struct {
	Src      string `json:"src"`
	Dst      string `json:"dst"`
	ReadOnly bool   `json:"readOnly"`
	File     bool   `json:"file,omitempty"`
}

// containerMounts resolves c's volumeMounts against the pod's written
// volumes.
func containerMounts(c *corev1.Container, volumes map[string]string) ([]bindMount, error) {
	var out []bindMount
	for _, m := range c.VolumeMounts {
		src, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s: no volume of that name was written", m.Name)
		}
		out = append(out, bindMount{Src: src, Dst: m.MountPath, ReadOnly: m.ReadOnly})
	}
	return out, nil
}

// A container with mounts starts as this node's own executable in a new
// mount namespace (clone with CLONE_NEWNS), with mountExecEnv naming the
// mounts and the container's argv; this package's init (mountExecInit)
// sees it, makes every mount private (so nothing mounted is seen by the
// host or another container), bind-mounts each volume folder at its path
// (read-only when asked) and execs the container's program, which keeps
// the process ID, process group and parent-death signal. Doing the mounts
// in the child, after clone, keeps the node's own threads out of any other
// mount namespace.
const mountExecEnv = "INFERMESH_NODE_MOUNT_EXEC"

type mountExec struct {
	Mounts []bindMount `json:"mounts"`
	Argv   []string    `json:"argv"`
}

func init() { mountExecInit() }

// mountExecInit does the mounts and execs when mountExecEnv is set; it
// never returns then (an error exits with status 127 after printing it).
func mountExecInit() {
	spec, ok := os.LookupEnv(mountExecEnv)
	if !ok {
		return
	}
	if err := runMountExec(spec); err != nil {
		fmt.Fprintln(os.Stderr, "node: container start:", err)
		os.Exit(127)
	}
}

func runMountExec(spec string) error {
	var me mountExec
	if err := json.Unmarshal([]byte(spec), &me); err != nil || len(me.Argv) == 0 {
		return fmt.Errorf("bad %s: %v", mountExecEnv, err)
	}
	// The program is opened before the mounts and executed through that
	// descriptor: a volume may be mounted over the folder that holds its
	// binary (the Gateway API suite's coredns pod mounts its Corefile at
	// /root, where the cache of image binaries lives), and a runtime's image
	// is never hidden by a volume. Close-on-exec: the kernel resolves the
	// path before it closes the descriptor (a script could not run so; no
	// image here is one).
	prog, err := unix.Open(me.Argv[0], unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", me.Argv[0], err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	for _, m := range me.Mounts {
		if err := bind(m); err != nil {
			return err
		}
	}
	env := make([]string, 0, len(os.Environ()))
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, mountExecEnv+"=") {
			env = append(env, e)
		}
	}
	return syscall.Exec(fmt.Sprintf("/proc/self/fd/%d", prog), me.Argv, env)
}

// bind creates m's mount path if missing (on the host's filesystem, which
// processes share: an empty folder; architecture/node.md) and bind-mounts
// the volume folder there. A file is bound only over an existing file: this
// node creates no file on the host.
func bind(m bindMount) error {
	if m.File {
		if st, err := os.Stat(m.Dst); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("mount path %s: not an existing file (%v)", m.Dst, err)
		}
	} else if err := os.MkdirAll(m.Dst, 0o755); err != nil {
		return fmt.Errorf("mount path %s: %w", m.Dst, err)
	}
	if err := unix.Mount(m.Src, m.Dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", m.Src, m.Dst, err)
	}
	if m.ReadOnly {
		if err := unix.Mount("", m.Dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", m.Dst, err)
		}
	}
	return nil
}

// withMounts rewrites a process start for mounts: the node's executable in
// a new mount namespace with mountExecEnv; argv and env unchanged when
// there are none.
func withMounts(argv, env []string, mounts []bindMount, attr *syscall.SysProcAttr) ([]string, []string, error) {
	if len(mounts) == 0 {
		return argv, env, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, errors.Join(errors.New("node: own executable for mounts"), err)
	}
	spec, err := json.Marshal(mountExec{Mounts: mounts, Argv: argv})
	if err != nil {
		return nil, nil, err
	}
	attr.Cloneflags |= unix.CLONE_NEWNS
	return []string{self}, append(env[:len(env):len(env)], mountExecEnv+"="+string(spec)), nil
}
