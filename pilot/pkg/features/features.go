// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package features

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Features are the flag values pilot-discovery runs with.
type Features struct {
	// EnableGatewayAPI turns the Gateway API controller on
	// (PILOT_ENABLE_GATEWAY_API).
	EnableGatewayAPI bool
	// EnableInferenceExtension turns InferencePool support on
	// (ENABLE_GATEWAY_API_INFERENCE_EXTENSION, alias
	// SUPPORT_GATEWAY_API_INFERENCE_EXTENSION). Off: no InferencePool informer
	// runs and a route to a pool gets the not-enabled message.
	EnableInferenceExtension bool
	// EnableGatewayAPIStatus lets the leader write status
	// (PILOT_ENABLE_GATEWAY_API_STATUS).
	EnableGatewayAPIStatus bool
	// ControllerName is the spec.controllerName of our GatewayClasses and the
	// controllerName of our status entries (PILOT_GATEWAY_API_CONTROLLER_NAME).
	ControllerName string
	// DefaultGatewayClassName is the GatewayClass created when missing
	// (PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME).
	DefaultGatewayClassName string
	// ClusterDomain is the DNS suffix of Service hostnames, as in
	// <svc>.<ns>.svc.<ClusterDomain> (CLUSTER_DOMAIN).
	ClusterDomain string
	// EnableGatewayDeployment makes, for each Gateway of our classes, the
	// ServiceAccount, Service, bootstrap ConfigMap and Envoy Deployment that
	// serve it (PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER).
	EnableGatewayDeployment bool
	// GatewayProxyImage is the Envoy image of Gateway Deployments
	// (PILOT_GATEWAY_PROXY_IMAGE).
	GatewayProxyImage string
	// GatewayXDSAddress is pilot-discovery's ADS address, host:port, that
	// Gateway proxies connect to (PILOT_GATEWAY_XDS_ADDRESS).
	GatewayXDSAddress string
	// GatewayXDSPlaintext makes Gateway proxies connect to ADS without TLS
	// (PILOT_GATEWAY_XDS_PLAINTEXT); it must match pilot-discovery's
	// --plaintext.
	GatewayXDSPlaintext bool
	// GatewayXDSCAFile is a PEM file whose certificates verify the ADS
	// server; its content is embedded in each bootstrap
	// (PILOT_GATEWAY_XDS_CA_FILE). Empty: the proxy image's system trust
	// store.
	GatewayXDSCAFile string
	// GatewayXDSServiceAccountAuth makes Gateway proxies send their
	// ServiceAccount token as "authorization: Bearer" on the ADS stream
	// (PILOT_GATEWAY_XDS_SERVICEACCOUNT_AUTH); it must match
	// pilot-discovery's --xds-auth=serviceaccount, and needs TLS.
	GatewayXDSServiceAccountAuth bool
	// GatewayXDSTokenAudience is the audience of that token: the Gateway
	// Deployment's projected token is issued for it, and pilot-discovery's
	// TokenReview asks for it (PILOT_GATEWAY_XDS_TOKEN_AUDIENCE,
	// overridden by discovery --xds-auth-audience). A token for any other
	// audience, such as the API server's own that every pod mounts, is
	// refused on ADS.
	GatewayXDSTokenAudience string
	// MaxRouteMatchesPerNamespace bounds the route matches (a rule without
	// matches counts one) that the routes of one namespace put into one
	// Gateway; past it that namespace's newest routes are not accepted on
	// that Gateway (PILOT_MAX_ROUTE_MATCHES_PER_NAMESPACE; 0: no limit).
	MaxRouteMatchesPerNamespace int
	// MaxRegexMatchesPerNamespace is the same bound for regular
	// expressions in matches (path, header, query parameter, gRPC method)
	// (PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE; 0: no limit).
	MaxRegexMatchesPerNamespace int
	// FileGatewayAPIChannel is the Gateway API channel (standard or
	// experimental) whose CRDs file mode (-f) checks Gateway API kinds
	// against (PILOT_FILE_GATEWAY_API_CHANNEL).
	FileGatewayAPIChannel string
}

// Flag describes one environment variable.
type Flag struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases,omitempty"`
	Type        string   `json:"type"` // "bool", "string" or "int"
	Default     string   `json:"default"`
	Description string   `json:"description"`
}

type flagDef struct {
	Flag
	set func(f *Features, v string) error
}

func boolFlag(name, def, desc string, field func(*Features) *bool, aliases ...string) flagDef {
	return flagDef{
		Flag: Flag{Name: name, Aliases: aliases, Type: "bool", Default: def, Description: desc},
		set: func(f *Features, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%q is not a boolean (use true or false)", v)
			}
			*field(f) = b
			return nil
		},
	}
}

// stringFlag is a string flag that must not be empty; check, when set,
// validates the value further.
func stringFlag(name, def, desc string, field func(*Features) *string, check func(string) error) flagDef {
	return flagDef{
		Flag: Flag{Name: name, Type: "string", Default: def, Description: desc},
		set: func(f *Features, v string) error {
			if strings.TrimSpace(v) == "" {
				return fmt.Errorf("must not be empty")
			}
			if check != nil {
				if err := check(v); err != nil {
					return fmt.Errorf("%q: %w", v, err)
				}
			}
			*field(f) = v
			return nil
		},
	}
}

// countFlag is a non-negative integer flag.
func countFlag(name, def, desc string, field func(*Features) *int) flagDef {
	return flagDef{
		Flag: Flag{Name: name, Type: "int", Default: def, Description: desc},
		set: func(f *Features, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return fmt.Errorf("%q is not a whole number of 0 or more", v)
			}
			*field(f) = n
			return nil
		},
	}
}

// optionalStringFlag is a string flag whose default is empty; any value is
// accepted.
func optionalStringFlag(name, desc string, field func(*Features) *string) flagDef {
	return flagDef{
		Flag: Flag{Name: name, Type: "string", Default: "", Description: desc},
		set:  func(f *Features, v string) error { *field(f) = strings.TrimSpace(v); return nil },
	}
}

// table is every flag, in the order --help lists them.
var table = []flagDef{
	boolFlag("PILOT_ENABLE_GATEWAY_API", "true",
		"Run the Gateway API controller (Gateways, HTTPRoutes, GRPCRoutes).",
		func(f *Features) *bool { return &f.EnableGatewayAPI }),
	boolFlag("ENABLE_GATEWAY_API_INFERENCE_EXTENSION", "false",
		"Support InferencePool backends (Gateway API Inference Extension): shadow Services, pool status, ext_proc to the EPP.",
		func(f *Features) *bool { return &f.EnableInferenceExtension }, "SUPPORT_GATEWAY_API_INFERENCE_EXTENSION"),
	boolFlag("PILOT_ENABLE_GATEWAY_API_STATUS", "true",
		"Write status (GatewayClass, Gateway, routes, InferencePools) from the leader.",
		func(f *Features) *bool { return &f.EnableGatewayAPIStatus }),
	stringFlag("PILOT_GATEWAY_API_CONTROLLER_NAME", "istio.io/gateway-controller",
		"GatewayClass controllerName we implement, and the controllerName of our status entries. Must differ from any istiod's on the same cluster.",
		func(f *Features) *string { return &f.ControllerName }, CheckControllerName),
	stringFlag("PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME", "istio",
		"Name of the GatewayClass created when it is missing.",
		func(f *Features) *string { return &f.DefaultGatewayClassName }, checkObjectName),
	stringFlag("CLUSTER_DOMAIN", "cluster.local",
		"DNS suffix of Service hostnames (<svc>.<ns>.svc.<domain>).",
		func(f *Features) *string { return &f.ClusterDomain }, CheckClusterDomain),
	boolFlag("PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER", "true",
		"Deploy each Gateway of our classes: ServiceAccount, Service, bootstrap ConfigMap and Envoy Deployment named <gateway>-<class>, owned by the Gateway.",
		func(f *Features) *bool { return &f.EnableGatewayDeployment }),
	stringFlag("PILOT_GATEWAY_PROXY_IMAGE", "docker.io/envoyproxy/envoy:distroless-v1.40.0",
		"Envoy image of Gateway Deployments (the Envoy release matching go-control-plane's envoy API module).",
		func(f *Features) *string { return &f.GatewayProxyImage }, checkNoSpace),
	stringFlag("PILOT_GATEWAY_XDS_ADDRESS", "pilot-discovery.infermesh-system.svc:15010",
		"ADS address (host:port) written into Gateway proxies' bootstrap.",
		func(f *Features) *string { return &f.GatewayXDSAddress }, CheckHostPort),
	boolFlag("PILOT_GATEWAY_XDS_PLAINTEXT", "false",
		"Gateway proxies connect to ADS without TLS. Implied by discovery --plaintext.",
		func(f *Features) *bool { return &f.GatewayXDSPlaintext }),
	optionalStringFlag("PILOT_GATEWAY_XDS_CA_FILE",
		"PEM file of the CA that signed the ADS server certificate, embedded in Gateway proxies' bootstrap; empty: the proxy image's system trust store.",
		func(f *Features) *string { return &f.GatewayXDSCAFile }),
	boolFlag("PILOT_GATEWAY_XDS_SERVICEACCOUNT_AUTH", "false",
		"Gateway proxies send their ServiceAccount token (projected, rotated by the kubelet) as \"authorization: Bearer\" on ADS. Implied by discovery --xds-auth=serviceaccount. Needs TLS.",
		func(f *Features) *bool { return &f.GatewayXDSServiceAccountAuth }),
	stringFlag("PILOT_GATEWAY_XDS_TOKEN_AUDIENCE", DefaultXDSTokenAudience,
		"Audience of the ServiceAccount token Gateway proxies send on ADS: their projected token is issued for it and pilot-discovery's TokenReview requires it. Overridden by discovery --xds-auth-audience.",
		func(f *Features) *string { return &f.GatewayXDSTokenAudience }, CheckAudience),
	stringFlag("PILOT_FILE_GATEWAY_API_CHANNEL", "standard",
		"File mode (discovery -f, status -f, check -f, proxy-config -f): the Gateway API channel, standard or experimental, whose CRDs Gateway API manifests are checked against, as the cluster the folder stands for installed them. Experimental fields (Listener.filters, HTTPRoute ExternalAuth, ...) refuse a manifest under standard.",
		func(f *Features) *string { return &f.FileGatewayAPIChannel }, checkChannel),
	countFlag("PILOT_MAX_ROUTE_MATCHES_PER_NAMESPACE", "20000",
		"Route matches (a rule without matches counts one; a TLSRoute rule one per hostname, a TCPRoute rule one) the HTTPRoutes, GRPCRoutes, TLSRoutes and TCPRoutes of one namespace may put into one Gateway, whose route configuration every namespace attached to it shares. Past it, that namespace's newest routes get Accepted=False (TooManyMatches) on that Gateway; other namespaces' routes are never affected. 0: no limit.",
		func(f *Features) *int { return &f.MaxRouteMatchesPerNamespace }),
	countFlag("PILOT_MAX_REGEX_MATCHES_PER_NAMESPACE", "10000",
		"Regular expressions (path, header and query parameter matches of type RegularExpression, gRPC method regex matches) the routes of one namespace may put into one Gateway; as PILOT_MAX_ROUTE_MATCHES_PER_NAMESPACE past it. 0: no limit.",
		func(f *Features) *int { return &f.MaxRegexMatchesPerNamespace }),
}

// checkChannel accepts the Gateway API's two release channels.
func checkChannel(v string) error {
	if v != "standard" && v != "experimental" {
		return fmt.Errorf("not standard or experimental")
	}
	return nil
}

// DefaultXDSTokenAudience is the default audience of Gateway proxies' ADS
// tokens: a name of ours, so that no token issued for another party (the
// API server's default audience in every pod's mounted token, Istio's
// "istio-ca") is accepted on our ADS port, and our token is accepted by no
// one else.
const DefaultXDSTokenAudience = "infermesh"

// Flags lists every flag with its default, in --help order.
func Flags() []Flag {
	out := make([]Flag, len(table))
	for i, d := range table {
		out[i] = d.Flag
	}
	return out
}

// Defaults returns the features with every flag at its default.
func Defaults() Features {
	f, err := Load(func(string) (string, bool) { return "", false })
	if err != nil {
		panic(err) // the defaults in the table are valid; a test checks it
	}
	return f
}

// Load reads every flag through lookup (os.LookupEnv in production). An
// alias is read when the flag itself is unset; when both are set they must
// agree. The error names each variable that is invalid and why.
func Load(lookup func(string) (string, bool)) (Features, error) {
	var f Features
	var errs []string
	for _, d := range table {
		v, from := d.Default, ""
		if x, ok := lookup(d.Name); ok {
			v, from = x, d.Name
		}
		for _, a := range d.Aliases {
			x, ok := lookup(a)
			switch {
			case !ok:
			case from == "":
				v, from = x, a
			case !sameValue(d.Type, x, v):
				errs = append(errs, fmt.Sprintf("%s=%q and its alias %s=%q disagree", from, v, a, x))
			}
		}
		if err := d.set(&f, v); err != nil {
			name := from
			if name == "" {
				name = d.Name + " (default)"
			}
			errs = append(errs, name+": "+err.Error())
		}
	}
	if len(errs) > 0 {
		return Features{}, fmt.Errorf("feature flags: %s", strings.Join(errs, "; "))
	}
	return f, nil
}

func sameValue(typ, a, b string) bool {
	if typ == "int" {
		x, err1 := strconv.Atoi(strings.TrimSpace(a))
		y, err2 := strconv.Atoi(strings.TrimSpace(b))
		return err1 == nil && err2 == nil && x == y
	}
	if typ == "bool" {
		x, err1 := strconv.ParseBool(a)
		y, err2 := strconv.ParseBool(b)
		return err1 == nil && err2 == nil && x == y
	}
	return a == b
}

// Usage is the flag table as text, for --help.
func Usage() string {
	var b strings.Builder
	b.WriteString("Feature flags (environment variables):\n")
	for _, d := range table {
		fmt.Fprintf(&b, "  %s (%s, default %s)", d.Name, d.Type, d.Default)
		if len(d.Aliases) > 0 {
			fmt.Fprintf(&b, " [alias %s]", strings.Join(d.Aliases, ", "))
		}
		fmt.Fprintf(&b, "\n      %s\n", d.Description)
	}
	return b.String()
}

// Handler serves the flags with their defaults and the values in use as JSON
// (the /debug/features endpoint).
func Handler(current Features) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Flags   []Flag   `json:"flags"`
			Current Features `json:"current"`
		}{Flags(), current})
	})
}
