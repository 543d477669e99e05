// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// The short tables follow `istioctl proxy-config`: the same columns where
// the data exists, the same tabwriter layout (cells padded by 5 spaces),
// "-" for an empty cell. Every cell goes through escapeCell: what proxies
// and users wrote (node ids, NACK messages, names, regexes) never reaches
// the terminal as control characters, and a tab or newline in a cell
// cannot split it into columns or rows.

// table is a tabwriter whose Flush also trims the padding after each
// line's last cell. Rows are written with row only, which escapes each
// cell.
type table struct {
	out io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable(w io.Writer) *table {
	t := &table{out: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 8, 5, ' ', 0)
	return t
}

// row writes one row, each cell escaped (escapeCell).
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if i > 0 {
			_, _ = t.tw.Write([]byte{'\t'})
		}
		_, _ = io.WriteString(t.tw, escapeCell(c))
	}
	_, _ = t.tw.Write([]byte{'\n'})
}

// Flush aligns the rows and writes them to the underlying writer.
func (t *table) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	for line := range strings.Lines(t.buf.String()) {
		b.WriteString(strings.TrimRight(line, " \n"))
		b.WriteByte('\n')
	}
	t.buf.Reset()
	_, err := io.WriteString(t.out, b.String())
	return err
}

// clusterName is a cluster name split as Istio spells it:
// direction|port|subset|fqdn. A name of another shape is all FQDN.
type clusterName struct{ direction, port, subset, fqdn string }

func parseClusterName(n string) clusterName {
	p := strings.Split(n, "|")
	if len(p) != 4 {
		return clusterName{fqdn: n}
	}
	return clusterName{direction: p[0], port: p[1], subset: p[2], fqdn: p[3]}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeClusters prints SERVICE FQDN, PORT, SUBSET, DIRECTION, TYPE and
// DESTINATION RULE, sorted by FQDN, port and subset. DESTINATION RULE is
// read from Istio's cluster metadata (filter_metadata istio.config) when
// present and is empty otherwise.
func writeClusters(w io.Writer, clusters []*clusterv3.Cluster) error {
	type row struct {
		n       clusterName
		typ, dr string
	}
	rows := make([]row, 0, len(clusters))
	for _, c := range clusters {
		rows = append(rows, row{n: parseClusterName(c.GetName()), typ: clusterType(c), dr: destinationRule(c)})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].n, rows[j].n
		if a.fqdn != b.fqdn {
			return a.fqdn < b.fqdn
		}
		if a.port != b.port {
			return portLess(a.port, b.port)
		}
		return a.subset < b.subset
	})
	t := newTable(w)
	t.row("SERVICE FQDN", "PORT", "SUBSET", "DIRECTION", "TYPE", "DESTINATION RULE")
	for _, r := range rows {
		t.row(r.n.fqdn, dash(r.n.port), dash(r.n.subset), dash(r.n.direction), r.typ, r.dr)
	}
	return t.Flush()
}

func portLess(a, b string) bool {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA == nil && errB == nil {
		return x < y
	}
	return a < b
}

func clusterType(c *clusterv3.Cluster) string {
	if ct := c.GetClusterType(); ct != nil {
		return ct.GetName()
	}
	return c.GetType().String()
}

// destinationRule formats Istio's "/apis/networking.istio.io/v1/namespaces/
// <ns>/destination-rule/<name>" as "<name>.<ns>", as istioctl does, and a
// BackendTLSPolicy's ".../backend-tls-policy/<name>" as
// "backendtlspolicy/<name>.<ns>".
func destinationRule(c *clusterv3.Cluster) string {
	cfg := c.GetMetadata().GetFilterMetadata()["istio"].GetFields()["config"].GetStringValue()
	p := strings.Split(cfg, "/")
	if len(p) == 8 && p[6] == "destination-rule" {
		return p[7] + "." + p[5]
	}
	if len(p) == 8 && p[6] == "backend-tls-policy" {
		return "backendtlspolicy/" + p[7] + "." + p[5]
	}
	return cfg
}

// writeEndpoints prints ENDPOINT, STATUS, OUTLIER CHECK and CLUSTER, one
// row per endpoint, sorted by cluster then address. The health status
// comes from EDS (UNKNOWN, what the control plane sends for a ready
// endpoint, shows as HEALTHY, as Envoy reports it); outlier detection is a
// data-plane state the control plane does not know, so it shows OK.
func writeEndpoints(w io.Writer, clas []*endpointv3.ClusterLoadAssignment) error {
	type row struct{ addr, status, cluster string }
	var rows []row
	for _, cla := range clas {
		for _, lle := range cla.GetEndpoints() {
			for _, e := range lle.GetLbEndpoints() {
				rows = append(rows, row{addr: endpointAddress(e), status: healthStatus(e.GetHealthStatus()), cluster: cla.GetClusterName()})
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].cluster != rows[j].cluster {
			return rows[i].cluster < rows[j].cluster
		}
		return addrLess(rows[i].addr, rows[j].addr)
	})
	t := newTable(w)
	t.row("ENDPOINT", "STATUS", "OUTLIER CHECK", "CLUSTER")
	for _, r := range rows {
		t.row(r.addr, r.status, "OK", r.cluster)
	}
	return t.Flush()
}

func endpointAddress(e *endpointv3.LbEndpoint) string {
	a := e.GetEndpoint().GetAddress()
	if sa := a.GetSocketAddress(); sa != nil {
		return net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
	}
	if p := a.GetPipe(); p != nil {
		return "unix://" + p.GetPath()
	}
	return "-"
}

// addrLess orders "ip:port" numerically where it can.
func addrLess(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	ia, ib := net.ParseIP(ha), net.ParseIP(hb)
	if errA != nil || errB != nil || ia == nil || ib == nil {
		return a < b
	}
	if c := compareIP(ia, ib); c != 0 {
		return c < 0
	}
	return portLess(pa, pb)
}

func compareIP(a, b net.IP) int {
	a16, b16 := a.To16(), b.To16()
	for i := range a16 {
		if a16[i] != b16[i] {
			if a16[i] < b16[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func healthStatus(h corev3.HealthStatus) string {
	if h == corev3.HealthStatus_UNKNOWN {
		return "HEALTHY"
	}
	return h.String()
}

// writeListeners prints ADDRESSES, PORT, MATCH and DESTINATION, one row per
// filter chain, sorted by port.
func writeListeners(w io.Writer, listeners []*listenerv3.Listener) error {
	type row struct {
		addr        string
		port        uint32
		match, dest string
	}
	var rows []row
	for _, l := range listeners {
		sa := l.GetAddress().GetSocketAddress()
		for _, fc := range l.GetFilterChains() {
			rows = append(rows, row{addr: sa.GetAddress(), port: sa.GetPortValue(), match: chainMatch(fc.GetFilterChainMatch()), dest: chainDestination(fc)})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].port != rows[j].port {
			return rows[i].port < rows[j].port
		}
		return rows[i].addr < rows[j].addr
	})
	t := newTable(w)
	t.row("ADDRESSES", "PORT", "MATCH", "DESTINATION")
	for _, r := range rows {
		t.row(dash(r.addr), strconv.FormatUint(uint64(r.port), 10), r.match, r.dest)
	}
	return t.Flush()
}

func chainMatch(m *listenerv3.FilterChainMatch) string {
	var parts []string
	if sn := m.GetServerNames(); len(sn) > 0 {
		parts = append(parts, "SNI: "+strings.Join(sn, ","))
	}
	if tp := m.GetTransportProtocol(); tp != "" {
		parts = append(parts, "Trans: "+tp)
	}
	if ap := m.GetApplicationProtocols(); len(ap) > 0 {
		parts = append(parts, "App: "+strings.Join(ap, ","))
	}
	if len(parts) == 0 {
		return "ALL"
	}
	return strings.Join(parts, "; ")
}

func chainDestination(fc *listenerv3.FilterChain) string {
	for _, f := range fc.GetFilters() {
		hcm := &hcmv3.HttpConnectionManager{}
		if f.GetTypedConfig().MessageIs(hcm) && f.GetTypedConfig().UnmarshalTo(hcm) == nil {
			if n := hcm.GetRds().GetRouteConfigName(); n != "" {
				return "Route: " + n
			}
			return "Inline Route: " + hcm.GetRouteConfig().GetName()
		}
		tcp := &tcpv3.TcpProxy{}
		if f.GetTypedConfig().MessageIs(tcp) && f.GetTypedConfig().UnmarshalTo(tcp) == nil {
			return "Cluster: " + tcp.GetCluster()
		}
	}
	return "-"
}

// writeRoutes prints NAME, VHOST NAME, DOMAINS, MATCH and ROUTE (the route
// entry's name, <route namespace>.<route name>.<rule index>), one row per
// route entry in the order Envoy evaluates them.
func writeRoutes(w io.Writer, rcs []*routev3.RouteConfiguration) error {
	sorted := append([]*routev3.RouteConfiguration(nil), rcs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].GetName() < sorted[j].GetName() })
	t := newTable(w)
	t.row("NAME", "VHOST NAME", "DOMAINS", "MATCH", "ROUTE")
	for _, rc := range sorted {
		for _, vh := range rc.GetVirtualHosts() {
			domains := strings.Join(vh.GetDomains(), ",")
			for _, r := range vh.GetRoutes() {
				t.row(rc.GetName(), vh.GetName(), domains, routeMatch(r.GetMatch()), dash(r.GetName()))
			}
		}
	}
	return t.Flush()
}

// routeMatch describes a path match as istioctl does: a prefix gets a
// trailing "*", and header, query and method conditions are summarized.
func routeMatch(m *routev3.RouteMatch) string {
	var s string
	switch p := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		s = strings.TrimSuffix(p.Prefix, "/") + "/*"
		if p.Prefix != "" && !strings.HasSuffix(p.Prefix, "/") {
			s = p.Prefix + "*"
		}
	case *routev3.RouteMatch_Path:
		s = p.Path
	case *routev3.RouteMatch_SafeRegex:
		s = "regex " + p.SafeRegex.GetRegex()
	case *routev3.RouteMatch_PathSeparatedPrefix:
		s = p.PathSeparatedPrefix + "/*"
	case *routev3.RouteMatch_ConnectMatcher_:
		s = "CONNECT"
	default:
		s = "-"
	}
	var extra []string
	for _, h := range m.GetHeaders() {
		extra = append(extra, "header "+h.GetName())
	}
	for _, q := range m.GetQueryParameters() {
		extra = append(extra, "query "+q.GetName())
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

// writeSecrets prints the SDS secrets with istioctl proxy-config secret's
// columns. Every secret a proxy holds from SDS is active (Envoy's
// dynamic_active_secrets). The certificate columns describe the first
// certificate of the chain (the leaf); VALID CERT says whether it parses
// and now is inside its validity period.
func writeSecrets(w io.Writer, secrets []*tlsv3.Secret, now time.Time) error {
	t := newTable(w)
	t.row("RESOURCE NAME", "TYPE", "STATUS", "VALID CERT", "SERIAL NUMBER", "NOT AFTER", "NOT BEFORE")
	for _, s := range secrets {
		typ, pemBytes := "-", []byte(nil)
		switch {
		case s.GetTlsCertificate() != nil:
			typ, pemBytes = "Cert Chain", s.GetTlsCertificate().GetCertificateChain().GetInlineBytes()
		case s.GetValidationContext() != nil:
			typ, pemBytes = "CA", s.GetValidationContext().GetTrustedCa().GetInlineBytes()
		}
		valid, serial, notAfter, notBefore := "false", "-", "-", "-"
		if cert := firstCertificate(pemBytes); cert != nil {
			serial = cert.SerialNumber.Text(16)
			notAfter = cert.NotAfter.UTC().Format(time.RFC3339)
			notBefore = cert.NotBefore.UTC().Format(time.RFC3339)
			valid = strconv.FormatBool(!now.Before(cert.NotBefore) && !now.After(cert.NotAfter))
		}
		t.row(s.GetName(), typ, "ACTIVE", valid, serial, notAfter, notBefore)
	}
	return t.Flush()
}

// firstCertificate parses the first CERTIFICATE block of a PEM bundle; nil
// when there is none or it does not parse.
func firstCertificate(bundle []byte) *x509.Certificate {
	for len(bundle) > 0 {
		var b *pem.Block
		b, bundle = pem.Decode(bundle)
		if b == nil {
			return nil
		}
		if b.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil
			}
			return cert
		}
	}
	return nil
}
