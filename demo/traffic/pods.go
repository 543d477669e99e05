// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package traffic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/infermesh/infermesh/pkg/test/kubeenv"
	"github.com/infermesh/infermesh/pkg/test/vllmsim"
)

// SimConfig is a simulator's configuration and the port it serves.
type SimConfig struct {
	Config vllmsim.Config
	Port   int
}

// SimConfigFromPod reads a model-server pod's first container's arguments
// as llm-d-inference-sim reads them (--model, --port, --max-loras,
// --lora-modules with one JSON object {"name": ...} per value) into the
// simulator's configuration, PodName the pod's name. A flag it does not
// know, a flag without its value or a bad value is an error naming the
// pod and the flag.
func SimConfigFromPod(pod corev1.Pod) (SimConfig, error) {
	sc := SimConfig{Config: vllmsim.Config{PodName: pod.Name}}
	if len(pod.Spec.Containers) == 0 {
		return sc, fmt.Errorf("pod %s/%s has no container", pod.Namespace, pod.Name)
	}
	c := pod.Spec.Containers[0]
	bad := func(format string, args ...any) (SimConfig, error) {
		return sc, fmt.Errorf("pod %s/%s container %s: %s", pod.Namespace, pod.Name, c.Name, fmt.Sprintf(format, args...))
	}
	args := c.Args
	for i := 0; i < len(args); i++ {
		flag := args[i]
		if !strings.HasPrefix(flag, "--") {
			return bad("argument %q: want a --flag", flag)
		}
		if i+1 >= len(args) {
			return bad("%s has no value", flag)
		}
		i++
		v := args[i]
		switch flag {
		case "--model":
			sc.Config.Model = v
		case "--port":
			p, err := strconv.Atoi(v)
			if err != nil || p <= 0 || p > 65535 {
				return bad("--port %q: want a port number", v)
			}
			sc.Port = p
		case "--max-loras":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return bad("--max-loras %q: want a count", v)
			}
			sc.Config.MaxLoRAs = n
		case "--lora-modules":
			var m struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal([]byte(v), &m); err != nil || m.Name == "" {
				return bad(`--lora-modules %q: want {"name": "..."}`, v)
			}
			sc.Config.LoRAs = append(sc.Config.LoRAs, m.Name)
		default:
			return bad("flag %s is not one the demo's simulator takes (--model, --port, --max-loras, --lora-modules)", flag)
		}
	}
	switch {
	case sc.Config.Model == "":
		return bad("no --model")
	case sc.Port == 0:
		return bad("no --port")
	}
	return sc, nil
}

// CheckPrivileges reports why this machine cannot run the demo's network
// namespaces, or nil when it can: it needs root and iproute2's ip, and
// `ip netns add` must work (it does not in a user namespace without the
// host's root, such as `unshare -U`). The probe namespace is deleted.
func CheckPrivileges() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("not root (uid %d): network namespaces and veth links need CAP_SYS_ADMIN and CAP_NET_ADMIN", uid)
	}
	ip, err := kubeenv.FindIP()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%sprobe-%d", NetNSPrefix, os.Getpid())
	if out, err := runIP(ip, "netns", "add", name); err != nil {
		return fmt.Errorf("`ip netns add` fails here: %v: %s", err, out)
	}
	if out, err := runIP(ip, "netns", "del", name); err != nil {
		return fmt.Errorf("`ip netns del %s` failed: %v: %s", name, err, out)
	}
	return nil
}

// namespacesLeft returns those of names that `ip netns list` still shows.
func namespacesLeft(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ip, err := kubeenv.FindIP()
	if err != nil {
		return nil, err
	}
	out, err := runIP(ip, "netns", "list")
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %v: %s", err, out)
	}
	return NamespacesIn(out, names), nil
}

// NamespacesIn returns those of names that the output of `ip netns list`
// lists (one namespace a line, its name first, maybe followed by " (id: N)").
func NamespacesIn(list string, names []string) []string {
	listed := map[string]bool{}
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	var left []string
	for _, n := range names {
		if listed[n] {
			left = append(left, n)
		}
	}
	return left
}

// runIP runs ip in a process group of its own (kubeenv.RunInOwnGroup), so
// a Ctrl-C at the terminal never kills it half-way.
func runIP(ip string, args ...string) (string, error) {
	var out bytes.Buffer
	err := kubeenv.RunInOwnGroup(func() *exec.Cmd {
		cmd := exec.Command(ip, args...)
		out.Reset()
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd
	})
	return strings.TrimSpace(out.String()), err
}
