// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// loadBalancer is the cluster's service proxy and load-balancer controller.
// Every ClusterIP is served as kube-proxy's user-space mode served it
// (syncClusterIP). And, as
// cloud-provider-kind is kind's: every Service of type LoadBalancer gets
// its own IPv4 address, written to status.loadBalancer.ingress, and each
// of its TCP ports on that address forwards every connection to one ready
// endpoint of the Service (from its EndpointSlices), chosen at random.
//
// Why a forwarder on an address of its own rather than a pod IP in the
// status: the address must follow the Service, not one pod. A pod IP would
// keep pointing at a deleted or not-ready pod, skip the Service's port
// mapping (port to targetPort) and its selector; cloud-provider-kind, too,
// gives each LoadBalancer Service a container address that proxies to the
// Service's backends. The addresses are /32s (from lbCIDR) on the node's
// bridge in the host namespace, so the host, where the suite runs, reaches
// them as its own, and pods reach them through their default route to the
// host.
// Our Gateway controller reads the address from the Service status, as it
// does on any cluster.
type loadBalancer struct {
	client kubernetes.Interface
	// clusterIPs are the ClusterIPs served (kube-proxy's part), by Service.
	clusterIPs map[string]netip.Addr
	link       string
	pool       []netip.Addr
	logf       func(string, ...any)

	mu        sync.Mutex
	addrs     map[string]netip.Addr   // Service namespace/name → address
	listeners map[string]net.Listener // "address:port" → listener
	slices    cache.Indexer           // EndpointSlices
}

// startLoadBalancer starts the controller until ctx ends; its addresses go
// on link.
func startLoadBalancer(ctx context.Context, client kubernetes.Interface, link string, cidr netip.Prefix, logf func(string, ...any)) (*loadBalancer, error) {
	lb := &loadBalancer{client: client, link: link, logf: logf,
		addrs: map[string]netip.Addr{}, listeners: map[string]net.Listener{}, clusterIPs: map[string]netip.Addr{}}
	for a := cidr.Masked().Addr().Next(); cidr.Contains(a) && len(lb.pool) < 250; a = a.Next() {
		lb.pool = append(lb.pool, a)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	lb.slices = sliceInf.Informer().GetIndexer()
	if err := lb.slices.AddIndexers(cache.Indexers{"service": func(obj any) ([]string, error) {
		s := obj.(*discoveryv1.EndpointSlice)
		return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
	}}); err != nil {
		lb.stop()
		return nil, err
	}
	_, err := svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { lb.sync(ctx, obj.(*corev1.Service)) },
		UpdateFunc: func(_, obj any) { lb.sync(ctx, obj.(*corev1.Service)) },
		DeleteFunc: func(obj any) {
			if s, ok := obj.(*corev1.Service); ok {
				lb.release(s.Namespace + "/" + s.Name)
				lb.releaseClusterIP(s.Namespace + "/" + s.Name)
			}
		},
	})
	if err != nil {
		lb.stop()
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return lb, nil
}

// sync serves a Service's ClusterIP (kube-proxy's part) and gives a
// LoadBalancer Service its address, listeners and status.
func (lb *loadBalancer) sync(ctx context.Context, svc *corev1.Service) {
	key := svc.Namespace + "/" + svc.Name
	lb.syncClusterIP(key, svc)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		lb.release(key)
		return
	}
	// spec.loadBalancerIP asks for one address, as cloud load balancers
	// (and MetalLB) honour it: given when it is in the pool and free;
	// otherwise the Service gets no address at all, as a cloud provider
	// leaves it pending with an error event.
	var want netip.Addr
	if ip := svc.Spec.LoadBalancerIP; ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil || !slices.Contains(lb.pool, a) {
			lb.logf("load balancer: %s: requested address %q is not in the pool; none assigned", key, ip)
			lb.release(key)
			if err := lb.writeStatus(ctx, svc, netip.Addr{}); err != nil {
				lb.logf("load balancer: %s status: %v", key, err)
			}
			return
		}
		want = a
	}
	if cur, ok := lb.addressOf(key); ok && want.IsValid() && cur != want {
		lb.release(key) // the requested address changed
	}
	addr, err := lb.assign(key, want)
	if err != nil {
		lb.logf("load balancer: %s: %v", key, err)
		return
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if err := lb.listen(key, addr, p); err != nil {
			lb.logf("load balancer: %s port %d: %v", key, p.Port, err)
		}
	}
	if err := lb.writeStatus(ctx, svc, addr); err != nil {
		lb.logf("load balancer: %s status: %v", key, err)
	}
}

// writeStatus sets svc's status.loadBalancer.ingress to addr (none when
// addr is the zero Addr), rereading the Service on a conflict (its owner
// may have just changed it).
func (lb *loadBalancer) writeStatus(ctx context.Context, svc *corev1.Service, addr netip.Addr) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		in := svc.Status.LoadBalancer.Ingress
		if (!addr.IsValid() && len(in) == 0) || (len(in) == 1 && in[0].IP == addr.String()) {
			return nil
		}
		out := svc.DeepCopy()
		out.Status.LoadBalancer.Ingress = nil
		if addr.IsValid() {
			out.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr.String(), IPMode: ptrIPMode(corev1.LoadBalancerIPModeVIP)}}
		}
		_, err := lb.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, gerr := lb.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{}); gerr == nil {
				svc = fresh
			}
		}
		return err
	})
}

func ptrIPMode(m corev1.LoadBalancerIPMode) *corev1.LoadBalancerIPMode { return &m }

// addressOf is the address key holds, if any.
func (lb *loadBalancer) addressOf(key string) (netip.Addr, bool) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	a, ok := lb.addrs[key]
	return a, ok
}

// assign returns key's address, taking want (when valid and free) or else
// a free one from the pool, and adding it to the link the first time.
func (lb *loadBalancer) assign(key string, want netip.Addr) (netip.Addr, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if a, ok := lb.addrs[key]; ok {
		return a, nil
	}
	used := map[netip.Addr]bool{}
	for _, a := range lb.addrs {
		used[a] = true
	}
	candidates := lb.pool
	if want.IsValid() {
		if used[want] {
			return netip.Addr{}, fmt.Errorf("requested address %s is in use", want)
		}
		candidates = []netip.Addr{want}
	}
	for _, a := range candidates {
		if used[a] {
			continue
		}
		if err := ipRun("addr", "add", a.String()+"/32", "dev", lb.link); err != nil {
			return netip.Addr{}, err
		}
		lb.addrs[key] = a
		return a, nil
	}
	return netip.Addr{}, errors.New("no free load-balancer address")
}

// listen starts the forwarder of one Service port, once.
func (lb *loadBalancer) listen(key string, addr netip.Addr, port corev1.ServicePort) error {
	hostPort := net.JoinHostPort(addr.String(), strconv.Itoa(int(port.Port)))
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if _, ok := lb.listeners[hostPort]; ok {
		return nil
	}
	l, err := net.Listen("tcp", hostPort)
	if err != nil {
		return err
	}
	lb.listeners[hostPort] = l
	go lb.serve(l, key, port.Name, port.Port)
	return nil
}

func (lb *loadBalancer) serve(l net.Listener, key, portName string, port int32) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go lb.forward(conn, key, portName, port)
	}
}

// forward copies conn to and from one ready endpoint of the Service port.
func (lb *loadBalancer) forward(conn net.Conn, key, portName string, port int32) {
	defer conn.Close()
	target, err := lb.pick(key, portName)
	if err != nil {
		lb.logf("load balancer: %s port %d: %v", key, port, err)
		return
	}
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		lb.logf("load balancer: %s port %d: %v", key, port, err)
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if c, ok := dst.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, conn)
	go cp(conn, up)
	<-done
	<-done
}

// pick chooses a ready endpoint of the Service port named portName (the
// EndpointSlice port of that name carries the target port).
func (lb *loadBalancer) pick(key, portName string) (string, error) {
	objs, err := lb.slices.ByIndex("service", key)
	if err != nil {
		return "", err
	}
	var targets []string
	for _, o := range objs {
		s := o.(*discoveryv1.EndpointSlice)
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		var target int32 = -1
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == portName && p.Port != nil {
				target = *p.Port
			}
		}
		if target < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				targets = append(targets, net.JoinHostPort(a, strconv.Itoa(int(target))))
			}
		}
	}
	if len(targets) == 0 {
		return "", errors.New("no ready endpoint")
	}
	return targets[rand.IntN(len(targets))], nil
}

// release closes a Service's listeners and frees its address.
func (lb *loadBalancer) release(key string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	a, ok := lb.addrs[key]
	if !ok {
		return
	}
	for hp, l := range lb.listeners {
		if h, _, _ := net.SplitHostPort(hp); h == a.String() {
			_ = l.Close()
			delete(lb.listeners, hp)
		}
	}
	delete(lb.addrs, key)
	_ = ipRun("addr", "del", a.String()+"/32", "dev", lb.link)
}

// stop closes every listener and removes every address.
func (lb *loadBalancer) stop() {
	lb.mu.Lock()
	keys := make([]string, 0, len(lb.addrs)+len(lb.clusterIPs))
	for k := range lb.addrs {
		keys = append(keys, k)
	}
	for k := range lb.clusterIPs {
		keys = append(keys, k)
	}
	lb.mu.Unlock()
	for _, k := range keys {
		lb.release(k)
		lb.releaseClusterIP(k)
	}
}

// syncClusterIP serves svc's ClusterIP as kube-proxy's (long gone)
// user-space mode did, since this machine has no iptables: the address on
// the node bridge (pods reach it through their default route to the host,
// the host as its own), each TCP port forwarding to a ready endpoint.
func (lb *loadBalancer) syncClusterIP(key string, svc *corev1.Service) {
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !ip.Is4() {
		return // headless, or no address yet
	}
	lb.mu.Lock()
	_, known := lb.clusterIPs[key]
	if !known {
		if err := ipRun("addr", "add", ip.String()+"/32", "dev", lb.link); err != nil {
			lb.mu.Unlock()
			lb.logf("service proxy: %s: %v", key, err)
			return
		}
		lb.clusterIPs[key] = ip
	}
	lb.mu.Unlock()
	for _, p := range svc.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if err := lb.listen(key, ip, p); err != nil {
			lb.logf("service proxy: %s port %d: %v", key, p.Port, err)
		}
	}
}

// releaseClusterIP stops serving a Service's ClusterIP.
func (lb *loadBalancer) releaseClusterIP(key string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	ip, ok := lb.clusterIPs[key]
	if !ok {
		return
	}
	for hp, l := range lb.listeners {
		if h, _, _ := net.SplitHostPort(hp); h == ip.String() {
			_ = l.Close()
			delete(lb.listeners, hp)
		}
	}
	delete(lb.clusterIPs, key)
	_ = ipRun("addr", "del", ip.String()+"/32", "dev", lb.link)
}

func ipRun(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %v: %v: %s", args, err, out)
	}
	return nil
}
