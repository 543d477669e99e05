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

	"github.com/infermesh/infermesh/pilot/pkg/model"
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
			"REFUSED counts the parts of the proxy's Gateway configuration that failed validation: each is served\n" +
			"at its last good version or left out, and listed after the table (\"-\": served in full).\n" +
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
		return withTimeoutHint(httpTransportHint(fmt.Errorf("reading /debug/syncz: %w", err), o.httpAddress), o.timeout)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading /debug/syncz: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("%s: HTTP %s: %s", req.URL, resp.Status, strings.TrimSpace(string(body)))
		if resp.StatusCode == http.StatusNotFound {
			err = withHint(err, "the monitoring port ("+defaultHTTPPort+") serves no /debug/ paths: use the debug port "+
				"(--debug-address, default localhost:"+defaultDebugPort+")")
		}
		return err
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

// writeProxyStatus prints NAME, GATEWAY, STREAM, a column per xDS type,
// REFUSED and PEER (the connection's remote address and stream id, which
// tell apart two streams with one node id), then one line per NACK with its
// error message and one line per refused part of each Gateway (once per
// Gateway). Everything a proxy or a user wrote is escaped (escapeCell).
func writeProxyStatus(w io.Writer, st []xds.ProxyStatus) error {
	t := newTable(w)
	header := []string{"NAME", "GATEWAY", "STREAM", "VERSION"}
	for _, ty := range proxyStatusTypes {
		header = append(header, ty.column)
	}
	header = append(header, "REFUSED", "PEER")
	t.row(header...)
	var nacks, refused []string
	refusedShown := map[string]bool{}
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
		cells = append(cells, refusedCell(len(p.Refused)), peer)
		t.row(cells...)
		if len(p.Refused) > 0 && !refusedShown[gw] {
			refusedShown[gw] = true
			refused = append(refused, refusedLines(gw, p.Refused)...)
		}
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
	if len(refused) > 0 {
		fmt.Fprintln(w, "\nRefused (failed validation in pilot-discovery):")
		for _, r := range refused {
			fmt.Fprintln(w, "  "+r)
		}
	}
	return nil
}

// refusedCell is the REFUSED cell: how many parts of the Gateway's
// configuration are not served as translated.
func refusedCell(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// refusedLines are the lines after the table for one Gateway's refused
// parts: Gateway, type, name, what is served instead, and the error.
func refusedLines(gw string, rs []model.RefusedResource) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		served := "left out"
		if r.LastGood {
			served = "last good version served"
		}
		out = append(out, escapeCell(gw)+" "+escapeCell(r.Type)+" "+escapeCell(r.Name)+" ("+served+"): "+escapeCell(r.Error))
	}
	return out
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
