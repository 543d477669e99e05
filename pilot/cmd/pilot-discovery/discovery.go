// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/infermesh/infermesh/pilot/pkg/bootstrap"
	"github.com/infermesh/infermesh/pilot/pkg/config/kube/gateway"
	"github.com/infermesh/infermesh/pilot/pkg/features"
	"github.com/infermesh/infermesh/pilot/pkg/xds"
	"github.com/infermesh/infermesh/pkg/kube"
	"github.com/infermesh/infermesh/pkg/version"
)

// discoveryOptions are the discovery command's flags.
type discoveryOptions struct {
	files           []string
	kubeconfig      string
	kubeQPS         float32
	kubeBurst       int
	adsAddress      string
	httpAddress     string
	debugAddress    string
	clusterDomain   string
	pushDebounce    time.Duration
	pushMaxDelay    time.Duration
	leaseNamespace  string
	tlsCertFile     string
	tlsKeyFile      string
	plaintext       bool
	xdsAuth         string
	xdsAuthAudience string
	xdsAuthRecheck  time.Duration
	shutdownTimeout time.Duration
	profileCPU      string
}

// deps is what commands read from their surroundings; tests replace it.
type deps struct {
	// lookupEnv reads an environment variable (os.LookupEnv).
	lookupEnv func(string) (string, bool)
	// home is the user's home directory ("" when unknown).
	home string
	// newClient builds the cluster client (newClient in kubeconfig.go).
	newClient func(clusterSource, ...kube.Option) (*kube.Client, error)
	// stderr receives the logs.
	stderr io.Writer
	// serving, when set, is called with the bound ADS, HTTP and debug
	// addresses (debug nil when off) once all listen and the signal handler
	// is installed.
	serving func(ads, http, debug net.Addr)
}

func defaultDeps() deps {
	home, _ := os.UserHomeDir()
	return deps{lookupEnv: os.LookupEnv, home: home, newClient: newClient, stderr: os.Stderr}
}

func newDiscoveryCommand(a *app) *cobra.Command {
	d := a.deps
	o := &discoveryOptions{}
	cmd := &cobra.Command{
		Use:   "discovery",
		Short: "Run the control plane against a cluster (or a folder of manifests) and serve Envoy configuration over ADS",
		Long: "discovery watches Gateways, HTTPRoutes, InferencePools and their Services in the cluster,\n" +
			"writes their status while holding the leader Lease, and serves each Gateway's Envoy its\n" +
			"listeners, routes, clusters and endpoints over ADS.\n\n" +
			"Cluster: --kubeconfig when set; else the pod's ServiceAccount when KUBERNETES_SERVICE_HOST is\n" +
			"set; else $KUBECONFIG; else ~/.kube/config.\n\n" +
			"File mode (-f DIR) needs no cluster: the manifests in DIR (Pods with their status stand in for\n" +
			"running pods) get the CRDs' defaults and validation; objects the API server would reject are\n" +
			"logged and left out; the folder is watched; statuses and shadow Services are computed, not\n" +
			"written (see the status command).\n\n" +
			"ADS is served over TLS (--tls-cert-file, --tls-key-file). Serving it in plaintext needs\n" +
			"--plaintext: anyone who can reach the port can read every Gateway's configuration.\n\n" +
			"Proxy authorization (--xds-auth=serviceaccount, cluster mode only): a proxy is served a\n" +
			"Gateway only with a token of that Gateway's own ServiceAccount (<gateway>-<class>, the one\n" +
			"its Deployment runs as) issued for --xds-auth-audience, checked by TokenReview when the\n" +
			"stream opens and every --xds-auth-recheck after. WITHOUT IT (--xds-auth=none, the default,\n" +
			"and always in file mode) ANY CLIENT THAT REACHES --ads-address AND NAMES A GATEWAY READS ITS\n" +
			"CONFIGURATION AND THE PRIVATE KEYS OF ITS HTTPS LISTENERS; this is logged as a warning at start.\n\n" +
			"The debug endpoints (/debug/config_dump, /debug/syncz, /debug/krtz, /debug/pprof/, ...) are\n" +
			"unauthenticated and show every Gateway's configuration, so they listen on --debug-address,\n" +
			"loopback by default (reach them with kubectl port-forward); --http-address serves only\n" +
			"/metrics and /ready.\n\n" +
			"SIGTERM or SIGINT stops it; shutdown is bounded by --shutdown-timeout.\n\n" + features.Usage(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runDiscovery(ctx, stop, o, d, a.log)
		},
	}
	leaseNS := "istio-system"
	if ns, ok := d.lookupEnv("POD_NAMESPACE"); ok && ns != "" {
		leaseNS = ns
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "file", "f", nil, "file mode: read Kubernetes manifests from this folder (and its subfolders) instead of a cluster, watch it for changes, and compute statuses and shadow Services without writing them; one folder (status, check and proxy-config take several paths)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path of a kubeconfig file (default: in-cluster when KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG, else ~/.kube/config)")
	f.Float32Var(&o.kubeQPS, "kube-qps", kube.DefaultQPS, "sustained requests per second to the API server, all clients together")
	f.IntVar(&o.kubeBurst, "kube-burst", kube.DefaultBurst, "requests to the API server allowed above --kube-qps at once")
	f.StringVar(&o.adsAddress, "ads-address", ":15010", "address (host:port) of the ADS gRPC server")
	f.StringVar(&o.httpAddress, "http-address", ":15014", "address (host:port) of the monitoring HTTP server: /metrics and /ready only")
	f.StringVar(&o.debugAddress, "debug-address", defaultDebugAddress, "address (host:port) of the debug HTTP server: /debug/config_dump, /debug/syncz, /debug/krtz, /debug/features, /debug/pprof/ (and /metrics, /ready). Unauthenticated, and it shows every Gateway's configuration and the command line: keep it on loopback (reach it with kubectl port-forward); any other address serves it to the network, which is logged as a warning; empty turns it off")
	f.StringVar(&o.clusterDomain, "cluster-domain", "", "DNS suffix of Service hostnames; overrides CLUSTER_DOMAIN (default: CLUSTER_DOMAIN, else cluster.local)")
	f.DurationVar(&o.pushDebounce, "push-debounce", xds.DefaultDebounce, "quiet period that ends a burst of changes before a push")
	f.DurationVar(&o.pushMaxDelay, "push-max-delay", xds.DefaultMaxDelay, "longest a change waits for its push (at least --push-debounce)")
	f.StringVar(&o.leaseNamespace, "lease-namespace", leaseNS, "namespace of the leader-election Lease ($POD_NAMESPACE when set)")
	f.StringVar(&o.tlsCertFile, "tls-cert-file", "", "PEM certificate (chain) of the ADS server; reloaded when the file changes")
	f.StringVar(&o.tlsKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	f.BoolVar(&o.plaintext, "plaintext", false, "serve ADS without TLS (anyone who can reach --ads-address reads every Gateway's configuration)")
	f.StringVar(&o.xdsAuth, "xds-auth", "none", "proxy authorization: none (any client that names a Gateway reads its configuration and HTTPS private keys), or serviceaccount (a token in the \"authorization: Bearer\" gRPC metadata, checked by TokenReview: it must be for --xds-auth-audience and of the Gateway's own ServiceAccount, <gateway>-<class> in its namespace; needs TLS and a cluster)")
	f.StringVar(&o.xdsAuthAudience, "xds-auth-audience", "", "audience the proxies' ServiceAccount tokens must be issued for, with --xds-auth=serviceaccount; Gateway Deployments' projected tokens get it (default: PILOT_GATEWAY_XDS_TOKEN_AUDIENCE, else "+features.DefaultXDSTokenAudience+")")
	f.DurationVar(&o.xdsAuthRecheck, "xds-auth-recheck", defaultXDSAuthRecheck, "with --xds-auth=serviceaccount, how often each open ADS stream's token and Gateway are checked again (one TokenReview per stream); a stream that no longer passes ends (at least "+minXDSAuthRecheck.String()+")")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long a signalled shutdown may take before the process gives up waiting")
	f.StringVar(&o.profileCPU, "profile-cpu", "", "write a CPU profile (pprof) of the whole process, from before the input is read until shutdown, to this file: start-up is over before /debug/pprof/profile can be asked")
	return cmd
}

// validate checks the flags alone, before anything is built. Each error
// names the flag and what it accepts.
func (o *discoveryOptions) validate() error {
	var errs []error
	hasCert, hasKey := o.tlsCertFile != "", o.tlsKeyFile != ""
	switch {
	case hasCert != hasKey:
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file must be given together"))
	case hasCert && o.plaintext:
		errs = append(errs, errors.New("--plaintext conflicts with --tls-cert-file and --tls-key-file"))
	case !hasCert && !o.plaintext:
		errs = append(errs, errors.New("ADS needs TLS: set --tls-cert-file and --tls-key-file, "+
			"or pass --plaintext to serve every Gateway's configuration unencrypted to anyone who can reach --ads-address"))
	}
	switch o.xdsAuth {
	case "", "none":
	case xdsAuthServiceAccount:
		if len(o.files) > 0 {
			errs = append(errs, errors.New("--xds-auth=serviceaccount needs a cluster to review tokens: it cannot be used with --file"))
		}
		if o.plaintext {
			errs = append(errs, errors.New("--xds-auth=serviceaccount needs TLS: bearer tokens must not cross the network in plaintext"))
		}
	default:
		errs = append(errs, fmt.Errorf("--xds-auth %q: want none or serviceaccount", o.xdsAuth))
	}
	if o.xdsAuthAudience != "" {
		if err := features.CheckAudience(o.xdsAuthAudience); err != nil {
			errs = append(errs, fmt.Errorf("--xds-auth-audience %q: %w", o.xdsAuthAudience, err))
		}
	}
	if o.xdsAuthRecheck < minXDSAuthRecheck {
		errs = append(errs, fmt.Errorf("--xds-auth-recheck %s: must be at least %s", o.xdsAuthRecheck, minXDSAuthRecheck))
	}
	if o.clusterDomain != "" {
		if err := features.CheckClusterDomain(o.clusterDomain); err != nil {
			errs = append(errs, fmt.Errorf("--cluster-domain %q: %w", o.clusterDomain, err))
		}
	}
	errs = append(errs, checkListenAddress("--ads-address", o.adsAddress), checkListenAddress("--http-address", o.httpAddress))
	if o.debugAddress != "" {
		errs = append(errs, checkListenAddress("--debug-address", o.debugAddress))
	}
	if o.pushDebounce <= 0 {
		errs = append(errs, fmt.Errorf("--push-debounce %s: must be positive", o.pushDebounce))
	}
	if o.pushMaxDelay < o.pushDebounce {
		errs = append(errs, fmt.Errorf("--push-max-delay %s: must not be less than --push-debounce %s", o.pushMaxDelay, o.pushDebounce))
	}
	if len(o.files) > 1 {
		errs = append(errs, fmt.Errorf("--file given %d times: discovery watches one folder (status, check and proxy-config take several paths)", len(o.files)))
	} else if len(o.files) == 1 {
		if st, err := os.Stat(o.files[0]); err != nil {
			errs = append(errs, fmt.Errorf("--file: %w", err))
		} else if !st.IsDir() {
			errs = append(errs, fmt.Errorf("--file %q: discovery watches a folder of manifests; put the files in one", o.files[0]))
		}
	}
	if len(o.files) > 0 && o.kubeconfig != "" {
		errs = append(errs, errors.New("--file and --kubeconfig are exclusive: file mode reads no cluster"))
	}
	if o.leaseNamespace == "" {
		errs = append(errs, errors.New("--lease-namespace must not be empty"))
	} else if msgs := validation.IsDNS1123Label(o.leaseNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--lease-namespace %q: not a namespace name: %s", o.leaseNamespace, strings.Join(msgs, "; ")))
	}
	if o.kubeQPS <= 0 || o.kubeBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-qps %v and --kube-burst %d: must be positive", o.kubeQPS, o.kubeBurst))
	}
	if o.shutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout %s: must be positive", o.shutdownTimeout))
	}
	return errors.Join(errs...)
}

// runDiscovery runs the control plane until ctx ends (a signal), then stops
// it within o.shutdownTimeout. stopSignals restores default signal handling
// once shutdown starts, so a second signal kills the process. It returns
// nil after a clean shutdown; an error for invalid flags or feature flags,
// a missing cluster configuration, unusable TLS files, an address that
// cannot be bound, a serving failure, or a shutdown that overran.
func runDiscovery(ctx context.Context, stopSignals func(), o *discoveryOptions, d deps, log *slog.Logger) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.profileCPU != "" {
		stopProfile, err := startCPUProfile(o.profileCPU)
		if err != nil {
			return err
		}
		defer stopProfile(log)
	}
	feats, err := features.Load(d.lookupEnv)
	if err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	if o.clusterDomain != "" {
		feats.ClusterDomain = o.clusterDomain
	}
	if o.xdsAuthAudience != "" {
		feats.GatewayXDSTokenAudience = o.xdsAuthAudience
	}
	// Gateway proxies must reach ADS the way it is served: in plaintext
	// when --plaintext, with their ServiceAccount token when
	// --xds-auth=serviceaccount. The environment can only add to that.
	feats.GatewayXDSPlaintext = feats.GatewayXDSPlaintext || o.plaintext
	feats.GatewayXDSServiceAccountAuth = feats.GatewayXDSServiceAccountAuth || o.xdsAuth == xdsAuthServiceAccount

	var grpcOpts []grpc.ServerOption
	if !o.plaintext {
		creds, err := serverCredentials(o.tlsCertFile, o.tlsKeyFile)
		if err != nil {
			return err
		}
		grpcOpts = append(grpcOpts, grpc.Creds(creds))
	}
	args := bootstrap.Args{
		Features: feats, LeaseNamespace: o.leaseNamespace,
		Debounce: o.pushDebounce, MaxDelay: o.pushMaxDelay, GRPCOptions: grpcOpts,
	}
	source := "file " + strings.Join(o.files, "")
	var auth *saAuthenticator
	liftMemoryLimit := limitStartupMemory(d.lookupEnv)
	defer liftMemoryLimit()
	if len(o.files) > 0 {
		files, err := openFiles(o.files[0], log, feats)
		if err != nil {
			return err
		}
		args.Files = files
	} else {
		src, err := resolveClusterSource(o.kubeconfig, d.lookupEnv, d.home)
		if err != nil {
			return err
		}
		client, err := d.newClient(src, kube.WithQPS(o.kubeQPS), kube.WithBurst(o.kubeBurst),
			kube.WithAppliedFieldsOf(gateway.FieldManagers(feats)...))
		if err != nil {
			return fmt.Errorf("cluster client from %s: %w", src.Tried, err)
		}
		if o.xdsAuth == xdsAuthServiceAccount {
			auth = &saAuthenticator{
				reviews: client.Kube().AuthenticationV1().TokenReviews(), audience: feats.GatewayXDSTokenAudience,
				timeout: 10 * time.Second, recheck: o.xdsAuthRecheck, log: log,
			}
			args.GRPCOptions = append(args.GRPCOptions, grpc.ChainStreamInterceptor(auth.streamInterceptor()))
		}
		args.Client, source = client, "cluster "+src.Tried
	}
	srv, err := bootstrap.NewServer(args)
	if err != nil {
		return err
	}
	if auth != nil {
		// Before Run: no stream reaches the interceptor until the ADS
		// server serves.
		auth.gateways = srv.Controller()
	}
	var background sync.WaitGroup
	defer background.Wait()
	if args.Files != nil && srv.Controller() != nil {
		// check -f's problems, logged as they come and go.
		pctx, stopProblems := context.WithCancel(ctx)
		defer stopProblems()
		background.Go(func() {
			problemLog(pctx, args.Files, srv.Controller().Outputs, o.files[0], feats.EnableInferenceExtension, log)
		})
	}
	adsLis, err := net.Listen("tcp", o.adsAddress)
	if err != nil {
		return fmt.Errorf("--ads-address: %w", err)
	}
	httpLis, err := net.Listen("tcp", o.httpAddress)
	if err != nil {
		_ = adsLis.Close()
		return fmt.Errorf("--http-address: %w", err)
	}
	debugLis, err := listenDebug(o.debugAddress)
	if err != nil {
		_ = adsLis.Close()
		_ = httpLis.Close()
		return err
	}
	log.Info("pilot-discovery starting", "version", version.Version, "source", source,
		"ads", adsLis.Addr().String(), "tls", !o.plaintext, "xdsAuth", xdsAuthMode(o), "http", httpLis.Addr().String(),
		"debug", addrString(debugLis),
		"leaseNamespace", o.leaseNamespace, "clusterDomain", feats.ClusterDomain,
		"inferenceExtension", feats.EnableInferenceExtension, "controllerName", feats.ControllerName)
	warnDebugOnNetwork(log, debugLis)
	warnNoXDSAuth(log, o, adsLis)
	if d.serving != nil {
		var debugAddr net.Addr
		if debugLis != nil {
			debugAddr = debugLis.Addr()
		}
		d.serving(adsLis.Addr(), httpLis.Addr(), debugAddr)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, adsLis, httpLis, debugLis) }()
	readyCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	go whenReady(readyCtx, srv.XDS().Ready, liftMemoryLimit)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	stopSignals()
	log.Info("pilot-discovery shutting down", "timeout", o.shutdownTimeout.String())
	t := time.NewTimer(o.shutdownTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err == nil {
			log.Info("pilot-discovery stopped")
		}
		return err
	case <-t.C:
		return fmt.Errorf("shutdown did not finish within --shutdown-timeout %s", o.shutdownTimeout)
	}
}

// checkListenAddress checks a listen address flag: [HOST]:PORT with PORT
// from 0 (any free port) to 65535. The error names the flag.
func checkListenAddress(flag, v string) error {
	if v == "" {
		return fmt.Errorf("%s must not be empty", flag)
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("%s %q: want [HOST]:PORT: %w", flag, v, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%s %q: port %q: want a number from 0 to 65535", flag, v, port)
	}
	return nil
}
