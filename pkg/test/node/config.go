// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Config is what Start needs. Client, RESTConfig, NodeName, PodCIDR and
// StateDir are required; the rest have defaults.
type Config struct {
	// Client is the node's API client; RESTConfig is the same identity's
	// config, whose Host and CA the pods' kubeconfig points at (through the
	// node's forwarder on the bridge).
	Client     kubernetes.Interface
	RESTConfig *rest.Config
	// NodeName is the Node this agent registers, with its Lease.
	NodeName string
	// PodCIDR is the pod network, such as 10.244.64.0/24: its first address
	// is the bridge's (the Node's InternalIP and every pod's hostIP), the
	// others go to pods. It must not overlap another pod network of a test
	// that runs at the same time.
	PodCIDR netip.Prefix
	// BridgeName is the host bridge's link name (at most 15 bytes); empty
	// derives one from NodeName and the process ID.
	BridgeName string
	// Images maps an image reference, exactly as a pod spells it, to what
	// runs for it. Any other image leaves its container waiting with
	// ErrImagePull.
	Images map[string]Image
	// StateDir holds each pod's folder (kubeconfig, working directory) and
	// the container logs, under logs/ as the kubelet lays out
	// /var/log/pods: <namespace>_<name>_<uid>/<container>/<restartCount>.log.
	StateDir string
	// InitialBackOff and MaxBackOff bound the restart back-off: no wait
	// before the first restart, then InitialBackOff doubling up to
	// MaxBackOff (the kubelet's are 10 s and 300 s, the defaults).
	InitialBackOff, MaxBackOff time.Duration
	// Labels are added to the Node's labels.
	Labels map[string]string
	// ClusterDNS are the nameservers of ClusterFirst pods (the kubelet's
	// --cluster-dns); with none, such pods get the host's resolv.conf and a
	// MissingClusterDNS event, as on a kubelet (resolvconf.go).
	ClusterDNS []netip.Addr
	// ClusterDomain is the cluster's DNS domain (--cluster-domain); empty
	// means cluster.local.
	ClusterDomain string
	// HostResolvConf is the host's resolver file, for Default pods and the
	// host's search domains (--resolv-conf); empty means /etc/resolv.conf.
	HostResolvConf string
	// KubeletClientCA, when set, turns on the kubelet API (kubeletapi.go):
	// HTTPS on the bridge address, port KubeletPort (default 10250), for
	// clients whose certificate this PEM bundle verifies: the API server's
	// --kubelet-client-certificate, so that `kubectl logs` works through
	// it. Without it the node serves no kubelet API, and the Node's
	// kubelet endpoint port is 0.
	KubeletClientCA []byte
	KubeletPort     int
}

func (c *Config) validate() error {
	var errs []error
	if c.Client == nil || c.RESTConfig == nil {
		errs = append(errs, errors.New("node: Client and RESTConfig are required"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("NodeName is required"))
	}
	if !c.PodCIDR.IsValid() {
		errs = append(errs, errors.New("PodCIDR is required"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("StateDir is required"))
	}
	if len(c.BridgeName) > 15 {
		errs = append(errs, fmt.Errorf("BridgeName %q is longer than 15 bytes", c.BridgeName))
	}
	for ref, img := range c.Images {
		if st, err := os.Stat(img.Binary); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("image %q: binary %q is not an executable file", ref, img.Binary))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	return nil
}

func (c *Config) defaults() {
	if c.InitialBackOff == 0 {
		c.InitialBackOff = 10 * time.Second
	}
	if c.MaxBackOff == 0 {
		c.MaxBackOff = 300 * time.Second
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = "cluster.local"
	}
	if c.HostResolvConf == "" {
		c.HostResolvConf = "/etc/resolv.conf"
	}
	if len(c.KubeletClientCA) > 0 && c.KubeletPort == 0 {
		c.KubeletPort = 10250
	}
	if c.BridgeName == "" {
		h := fnv.New32a()
		_, _ = fmt.Fprintf(h, "%s/%d", c.NodeName, os.Getpid())
		c.BridgeName = fmt.Sprintf("imbr-%08x", h.Sum32())
	}
}

// backOff is the wait before restart number n+1 (n restarts so far).
func (c *Config) backOff(n int) time.Duration {
	if n == 0 {
		return 0
	}
	d := c.InitialBackOff
	for i := 1; i < n && d < c.MaxBackOff; i++ {
		d *= 2
	}
	return min(d, c.MaxBackOff)
}
