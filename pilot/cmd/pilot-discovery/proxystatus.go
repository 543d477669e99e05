// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
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
		Use:   "proxy-status [--debug-address HOST:PORT]",
		Short: "Print each connected proxy and whether it is in sync",
		Long: "proxy-status reads a running pilot-discovery's /debug/syncz and prints one row per ADS stream:\n" +
			"the proxy's node id, its Gateway, the protocol variant, its version, and per xDS type:\n" +
			"  SYNCED (v)               the proxy acked version v, the last one sent\n" +
			"  STALE (sent v, acked a)  the last version sent is not acked yet\n" +
			"  NACKED (v)               the proxy rejected version v (the errors follow the table)\n" +
			"  NOT SENT                 nothing of this type was sent on the stream\n" +
			"VERSION is the node's user_agent_name and version; \"(below floor)\" marks an Envoy older than\n" +
			"the version floor (" + xds.EnvoyVersionFloor.String() + "): it is served, but never reports the endpoint it served to the EPP.\n\n" +
			"The debug endpoints listen on loopback; against a cluster, forward the port first:\n" +
			"  kubectl -n infermesh-system port-forward deploy/pilot-discovery 15015",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runProxyStatus(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.httpAddress, "debug-address", "localhost:15015", "pilot-discovery's --debug-address, HOST:PORT or a URL")
	// The flag's name before the debug endpoints left --http-address.
	f.StringVar(&o.httpAddress, "http-address", "localhost:15015", "alias of --debug-address")
	_ = f.MarkHidden("http-address")
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
		return fmt.Errorf("--debug-address is required")
	}
	base := o.httpAddress
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/debug/syncz", nil)
	if err != nil {
		return fmt.Errorf("--debug-address %q: %w", o.httpAddress, err)
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

// writeProxyStatus prints NAME, GATEWAY, STREAM, a column per xDS type and
// PEER (the connection's remote address and stream id, which tell apart two
// streams with one node id), then one line per NACK with its error message.
// Everything a proxy wrote is escaped (escapeCell).
func writeProxyStatus(w io.Writer, st []xds.ProxyStatus) error {
	t := newTable(w)
	header := []string{"NAME", "GATEWAY", "STREAM", "VERSION"}
	for _, ty := range proxyStatusTypes {
		header = append(header, ty.column)
	}
	header = append(header, "PEER")
	t.row(header...)
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
		peer := peerCell(p)
		for _, ty := range proxyStatusTypes {
			ts := p.Types[ty.key]
			cells = append(cells, syncState(ts))
			if ts != nil && ts.Nacked != "" {
				nacks = append(nacks, strings.Join([]string{escapeCell(dash(p.Node)), escapeCell(gw), escapeCell(peer),
					ty.column, escapeCell(ts.Nacked) + ":", escapeCell(ts.NackMessage)}, " "))
			}
		}
		cells = append(cells, peer)
		t.row(cells...)
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

// peerCell is the PEER cell: "<remote address> (stream <id>)".
func peerCell(p xds.ProxyStatus) string {
	return dash(p.Peer) + " (stream " + strconv.FormatInt(p.Stream, 10) + ")"
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
