// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// Resource kinds proxy-config prints.
const (
	kindListeners = "listeners"
	kindRoutes    = "routes"
	kindClusters  = "clusters"
	kindEndpoints = "endpoints"
	kindSecrets   = "secrets"
	kindAll       = "all"
)

// resourceKinds are proxy-config's kinds with the names istioctl
// proxy-config takes for each: singular, plural and short form.
var resourceKinds = []struct {
	kind    string
	aliases []string
}{
	{kindListeners, []string{"listener", "listeners", "l"}},
	{kindRoutes, []string{"route", "routes", "r"}},
	{kindClusters, []string{"cluster", "clusters", "c"}},
	{kindEndpoints, []string{"endpoint", "endpoints", "ep", "eps"}},
	{kindSecrets, []string{"secret", "secrets", "s"}},
	{kindAll, []string{"all"}},
}

// parseKind maps any of a kind's names (any case) to the kind.
func parseKind(s string) (string, bool) {
	s = strings.ToLower(s)
	for _, k := range resourceKinds {
		if slices.Contains(k.aliases, s) {
			return k.kind, true
		}
	}
	return "", false
}

// kindList names every kind with its other names, for errors and help.
func kindList() string {
	var parts []string
	for _, k := range resourceKinds {
		var others []string
		for _, a := range k.aliases {
			if a != k.kind {
				others = append(others, a)
			}
		}
		if len(others) == 0 {
			parts = append(parts, k.kind)
		} else {
			parts = append(parts, k.kind+" ("+strings.Join(others, ", ")+")")
		}
	}
	return strings.Join(parts, ", ")
}

// kindArgs requires one argument naming a kind; a missing or unknown one
// gets the list of kinds.
func kindArgs(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return fmt.Errorf("missing resource kind: want one of %s", kindList())
	case len(args) > 1:
		return fmt.Errorf("one resource kind, got %d arguments %q: want one of %s", len(args), args, kindList())
	}
	if _, ok := parseKind(args[0]); !ok {
		return fmt.Errorf("unknown resource kind %q: want one of %s", args[0], kindList())
	}
	return nil
}

// completionKinds are the names shell completion offers.
func completionKinds() []string {
	var out []string
	for _, k := range resourceKinds {
		out = append(out, k.aliases...)
	}
	return out
}

// Output formats.
const (
	outputShort = "short"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// proxyConfigOptions are the proxy-config command's flags.
type proxyConfigOptions struct {
	files      []string
	gateway    string
	xdsAddress string
	plaintext  bool
	caFile     string
	serverName string
	tokenFile  string
	name       string
	fqdn       string
	output     string
	timeout    time.Duration
	// source, when set, replaces the ADS connection (tests).
	source configSource
}

func newProxyConfigCommand(a *app) *cobra.Command {
	o := &proxyConfigOptions{}
	cmd := &cobra.Command{
		Use:   "proxy-config KIND --gateway NAMESPACE/NAME (-f PATH... | --xds-address HOST:PORT)",
		Short: "Print the Envoy configuration a Gateway's proxies receive",
		Long: "proxy-config connects to a running pilot-discovery's ADS port as the Gateway's Envoy would\n" +
			"(node metadata GATEWAY_NAMESPACE and GATEWAY_NAME) and prints what it is sent: tables shaped like\n" +
			"`istioctl proxy-config` (-o short), or the resources as Envoy JSON (-o json) or YAML (-o yaml).\n" +
			"With -f PATH it needs no server: it runs discovery over the manifests in process (no port is\n" +
			"opened) and asks it the same way; the feature flags are read from the environment as discovery\n" +
			"does. -f takes files, folders (with their subfolders) and - for stdin, and repeats; manifests\n" +
			"that would be rejected are listed on stderr and the command exits 1 after printing.\n\n" +
			"KIND, as istioctl proxy-config takes it: " + kindList() + ".\n\n" +
			"--name keeps the resources of that name (listener, route configuration, cluster, or the cluster\n" +
			"of an endpoint list); --fqdn keeps clusters and endpoints of that service host.",
		Example: "  ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true pilot-discovery proxy-config all --gateway gateway-namespace/gateway -f examples/seed\n" +
			"  pilot-discovery proxy-config cluster --gateway gateway-namespace/gateway --xds-address 127.0.0.1:15010 --plaintext\n" +
			"  pilot-discovery proxy-config routes --gateway gateway-namespace/gateway --xds-address pilot:15010 --ca-file ca.pem --name http.80 -o json",
		Args:      kindArgs,
		ValidArgs: completionKinds(),
		RunE: func(cmd *cobra.Command, args []string) error {
			var fs *fileSource
			if len(o.files) > 0 && o.source == nil {
				fs = &fileSource{paths: o.files, stdin: cmd.InOrStdin(), lookupEnv: a.lookupEnv}
				o.source = fs
			}
			if err := runProxyConfig(cmd.Context(), cmd.OutOrStdout(), args[0], o); err != nil {
				return err
			}
			if fs != nil && len(fs.problems) > 0 {
				for _, p := range fs.problems {
					fmt.Fprintln(cmd.ErrOrStderr(), escapeCell(problemLine(p)))
				}
				return errManifestProblems
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.gateway, "gateway", "", "the Gateway, as NAMESPACE/NAME (required)")
	f.StringArrayVarP(&o.files, "file", "f", nil, "offline: compute the configuration from manifests (as discovery -f does) instead of asking a server; "+fileFlagUsage)
	f.StringVar(&o.xdsAddress, "xds-address", "", "pilot-discovery's ADS address, HOST:PORT (required unless -f)")
	f.BoolVar(&o.plaintext, "plaintext", false, "connect without TLS (the server must run with --plaintext)")
	f.StringVar(&o.caFile, "ca-file", "", "PEM CA certificates to verify the server with (default: the system roots)")
	f.StringVar(&o.serverName, "tls-server-name", "", "name to verify in the server's certificate (default: the host of --xds-address)")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding a ServiceAccount token to send as \"authorization: Bearer\", for --xds-auth=serviceaccount servers: a token of the Gateway's own ServiceAccount for the server's audience, such as the output of \"kubectl create token -n NS GATEWAY-CLASS --audience infermesh --duration 10m\" (needs TLS)")
	f.StringVar(&o.name, "name", "", "keep only resources of this name")
	f.StringVar(&o.fqdn, "fqdn", "", "keep only clusters and endpoints of this service FQDN")
	f.StringVarP(&o.output, "output", "o", outputShort, "output format: short, json or yaml")
	f.DurationVar(&o.timeout, "timeout", 15*time.Second, "how long to wait for the configuration (with -f, to compute it); a large configuration may need more")
	return cmd
}

// validate checks the flags; each error names the flag.
func (o *proxyConfigOptions) validate(kind string) error {
	if err := kindArgs(nil, []string{kind}); err != nil {
		return err
	}
	switch o.output {
	case outputShort, outputJSON, outputYAML:
	default:
		return fmt.Errorf("-o %q: want short, json or yaml", o.output)
	}
	if o.gateway == "" {
		return fmt.Errorf("--gateway is required: the Gateway as NAMESPACE/NAME")
	}
	if _, err := parseGatewayRef(o.gateway); err != nil {
		return err
	}
	if len(o.files) > 0 && o.xdsAddress != "" {
		return fmt.Errorf("-f and --xds-address are exclusive: read a folder, or ask a server")
	}
	if o.source == nil {
		if o.xdsAddress == "" {
			return fmt.Errorf("--xds-address or -f is required")
		}
		// Without a port, gRPC would dial 443 and the error would say
		// nothing listens there.
		if err := checkListenAddress("--xds-address", o.xdsAddress); err != nil {
			return err
		}
		if o.plaintext && (o.caFile != "" || o.serverName != "") {
			return fmt.Errorf("--plaintext conflicts with --ca-file and --tls-server-name")
		}
		if o.plaintext && o.tokenFile != "" {
			return fmt.Errorf("--token-file needs TLS: a token must not be sent in plaintext")
		}
	}
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", o.timeout)
	}
	return nil
}

// runProxyConfig fetches the Gateway's configuration and prints kind in
// o.output. Errors: invalid flags, an unreadable CA or token file, an
// unreachable server, a server that sent no configuration for the Gateway
// within o.timeout (wrapping errNoConfig), or a write error.
func runProxyConfig(ctx context.Context, w io.Writer, kind string, o *proxyConfigOptions) error {
	if err := o.validate(kind); err != nil {
		return err
	}
	kind, _ = parseKind(kind)
	gw, _ := parseGatewayRef(o.gateway)
	src := o.source
	if src == nil {
		creds, err := clientCredentials(o.plaintext, o.caFile, o.serverName)
		if err != nil {
			return err
		}
		src = &adsSource{address: o.xdsAddress, creds: creds, plaintext: o.plaintext, tokenFile: o.tokenFile}
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	res, err := src.Fetch(ctx, gw)
	if err != nil {
		return withTimeoutHint(err, o.timeout)
	}
	res = filterResources(res, o.name, o.fqdn)
	return printResources(w, kind, o.output, res)
}

// filterResources keeps the resources named name (when set) and the
// clusters and endpoints of service host fqdn (when set). fqdn applies to
// clusters and endpoints only; listeners, routes and secrets are kept whole.
func filterResources(res proxyResources, name, fqdn string) proxyResources {
	var out proxyResources
	for _, l := range res.Listeners {
		if name == "" || l.GetName() == name {
			out.Listeners = append(out.Listeners, l)
		}
	}
	for _, r := range res.Routes {
		if name == "" || r.GetName() == name {
			out.Routes = append(out.Routes, r)
		}
	}
	keepCluster := func(n string) bool {
		return (name == "" || n == name) && (fqdn == "" || parseClusterName(n).fqdn == fqdn)
	}
	for _, c := range res.Clusters {
		if keepCluster(c.GetName()) {
			out.Clusters = append(out.Clusters, c)
		}
	}
	for _, e := range res.Endpoints {
		if keepCluster(e.GetClusterName()) {
			out.Endpoints = append(out.Endpoints, e)
		}
	}
	for _, sec := range res.Secrets {
		if name == "" || sec.GetName() == name {
			out.Secrets = append(out.Secrets, sec)
		}
	}
	return out
}

// printResources writes kind of res in format.
func printResources(w io.Writer, kind, format string, res proxyResources) error {
	if format == outputShort {
		return printShort(w, kind, res)
	}
	var doc []byte
	var err error
	if kind == kindAll {
		doc, err = allJSON(res)
	} else {
		doc, err = listJSON(messagesOf(kind, res))
	}
	if err != nil {
		return err
	}
	if format == outputYAML {
		if doc, err = yaml.JSONToYAML(doc); err != nil {
			return err
		}
		_, err = w.Write(doc)
		return err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, doc, "", "    "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err = w.Write(b.Bytes())
	return err
}

func printShort(w io.Writer, kind string, res proxyResources) error {
	switch kind {
	case kindListeners:
		return writeListeners(w, res.Listeners)
	case kindRoutes:
		return writeRoutes(w, res.Routes)
	case kindClusters:
		return writeClusters(w, res.Clusters)
	case kindEndpoints:
		return writeEndpoints(w, res.Endpoints)
	case kindSecrets:
		return writeSecrets(w, res.Secrets, time.Now())
	}
	for i, write := range []func() error{
		func() error { return writeListeners(w, res.Listeners) },
		func() error { return writeRoutes(w, res.Routes) },
		func() error { return writeClusters(w, res.Clusters) },
		func() error { return writeEndpoints(w, res.Endpoints) },
		func() error { return writeSecrets(w, res.Secrets, time.Now()) },
	} {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if err := write(); err != nil {
			return err
		}
	}
	return nil
}

func messagesOf(kind string, res proxyResources) []proto.Message {
	var out []proto.Message
	switch kind {
	case kindListeners:
		for _, m := range res.Listeners {
			out = append(out, m)
		}
	case kindRoutes:
		for _, m := range res.Routes {
			out = append(out, m)
		}
	case kindClusters:
		for _, m := range res.Clusters {
			out = append(out, m)
		}
	case kindEndpoints:
		for _, m := range res.Endpoints {
			out = append(out, m)
		}
	case kindSecrets:
		for _, m := range res.Secrets {
			out = append(out, m)
		}
	}
	return out
}

// listJSON is msgs as a compact JSON array of protojson objects (Envoy's
// JSON: lowerCamelCase names, Any with "@type"). protojson's output is
// compacted so the result is byte-stable.
func listJSON(msgs []proto.Message) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		j, err := protojson.Marshal(m)
		if err != nil {
			return nil, err
		}
		if err := json.Compact(&b, j); err != nil {
			return nil, err
		}
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// allJSON is {"listeners": [...], "routes": [...], "clusters": [...],
// "endpoints": [...], "secrets": [...]}.
func allJSON(res proxyResources) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range []string{kindListeners, kindRoutes, kindClusters, kindEndpoints, kindSecrets} {
		if i > 0 {
			b.WriteByte(',')
		}
		l, err := listJSON(messagesOf(k, res))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%q:", k)
		b.Write(l)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
