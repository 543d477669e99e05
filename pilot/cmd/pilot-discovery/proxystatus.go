// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/infermesh/infermesh/pilot/pkg/xds"
)

// proxyStatusTypes are the xDS types proxy-status shows, in istioctl's
// column order, with the key /debug/syncz uses for each.
var proxyStatusTypes = []struct{ column, key string }{
	{"CDS", "cds"}, {"LDS", "lds"}, {"EDS", "eds"}, {"RDS", "rds"},
}

type proxyStatusOptions struct {
	httpAddress string
	output      string
	timeout     time.Duration
}

func newProxyStatusCommand() *cobra.Command {
	o := &proxyStatusOptions{}
	cmd := &cobra.Command{
		Use:   "proxy-status --http-address HOST:PORT",
		Short: "Print each connected proxy and whether it is in sync",
		Long: "proxy-status reads a running pilot-discovery's /debug/syncz and prints one row per ADS stream:\n" +
			"the proxy's node id, its Gateway, the protocol variant, its version, and per xDS type:\n" +
			"  SYNCED (v)               the proxy acked version v, the last one sent\n" +
			"  STALE (sent v, acked a)  the last version sent is not acked yet\n" +
			"  NACKED (v)               the proxy rejected version v (the errors follow the table)\n" +
			"  NOT SENT                 nothing of this type was sent on the stream\n" +
			"VERSION is the node's user_agent_name and version; \"(below floor)\" marks an Envoy older than\n" +
			"the version floor (" + xds.EnvoyVersionFloor.String() + "): it is served, but never reports the endpoint it served to the EPP.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runProxyStatus(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.httpAddress, "http-address", "localhost:15014", "pilot-discovery's HTTP (debug) address, HOST:PORT or a URL")
	f.StringVarP(&o.output, "output", "o", outputShort, "output format: short or json (/debug/syncz as is)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "HTTP request timeout")
	return cmd
}

// runProxyStatus fetches /debug/syncz and prints it. Errors: invalid
// flags, an unreachable server, a non-200 answer, or a body that is not
// the syncz JSON.
func runProxyStatus(ctx context.Context, w io.Writer, o *proxyStatusOptions) error {
	if o.output != outputShort && o.output != outputJSON {
		return fmt.Errorf("-o %q: want short or json", o.output)
	}
	if o.httpAddress == "" {
		return fmt.Errorf("--http-address is required")
	}
	base := o.httpAddress
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/debug/syncz", nil)
	if err != nil {
		return fmt.Errorf("--http-address %q: %w", o.httpAddress, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reading /debug/syncz: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading /debug/syncz: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %s: %s", req.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	var st []xds.ProxyStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("%s: not a syncz answer: %w", req.URL, err)
	}
	if o.output == outputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	return writeProxyStatus(w, st)
}

// writeProxyStatus prints NAME, GATEWAY, STREAM and a column per xDS type,
// then one line per NACK with its error message.
func writeProxyStatus(w io.Writer, st []xds.ProxyStatus) error {
	t := newTable(w)
	header := []string{"NAME", "GATEWAY", "STREAM", "VERSION"}
	for _, ty := range proxyStatusTypes {
		header = append(header, ty.column)
	}
	fmt.Fprintln(t, strings.Join(header, "\t"))
	var nacks []string
	for _, p := range st {
		gw := p.Gateway
		if gw == "" {
			gw = "- (no Gateway in node metadata)"
		}
		stream := "sotw"
		if p.Delta {
			stream = "delta"
		}
		cells := []string{dash(p.Node), gw, stream, versionCell(p.ProxyVersion)}
		for _, ty := range proxyStatusTypes {
			ts := p.Types[ty.key]
			cells = append(cells, syncState(ts))
			if ts != nil && ts.Nacked != "" {
				nacks = append(nacks, fmt.Sprintf("%s %s %s %s: %s", dash(p.Node), gw, ty.column, ts.Nacked, ts.NackMessage))
			}
		}
		fmt.Fprintln(t, strings.Join(cells, "\t"))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(nacks) > 0 {
		fmt.Fprintln(w, "\nNACKs:")
		for _, n := range nacks {
			fmt.Fprintln(w, "  "+n)
		}
	}
	return nil
}

// versionCell is the VERSION cell: user agent and version as the node sent
// them, and whether the version floor holds it back.
func versionCell(v xds.ProxyVersion) string {
	cell := strings.TrimSpace(v.UserAgent + " " + v.Version)
	if cell == "" {
		cell = "-"
	}
	if v.BelowFloor {
		cell += " (below floor)"
	}
	return cell
}

// syncState is one type's cell.
func syncState(ts *xds.TypeStatus) string {
	switch {
	case ts == nil || ts.Sent == "":
		return "NOT SENT"
	case ts.Nacked != "":
		return "NACKED (" + ts.Nacked + ")"
	case ts.Acked == ts.Sent:
		return "SYNCED (" + ts.Sent + ")"
	default:
		return "STALE (sent " + ts.Sent + ", acked " + dash(ts.Acked) + ")"
	}
}
