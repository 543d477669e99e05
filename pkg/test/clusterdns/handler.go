// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package clusterdns

import (
	"context"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// handler answers one query: authoritatively under the zone, by forwarding
// (or REFUSED) outside it.
type handler struct {
	records  *records
	zone     string // "<domain>."
	upstream []string
}

func (h *handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	_ = w.WriteMsg(h.reply(w.RemoteAddr().Network(), req))
}

// reply answers req, which came over network ("udp" or "tcp").
func (h *handler) reply(network string, req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	if req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 {
		return m.SetRcode(req, dns.RcodeNotImplemented)
	}
	q := req.Question[0]
	if !inZone(q.Name, h.zone) {
		return h.forward(network, req)
	}
	rcode, answers := h.records.answer(q.Name, q.Qtype)
	m.SetRcode(req, rcode)
	m.Authoritative = true
	m.Answer = answers
	return m
}

func inZone(name, zone string) bool {
	name = strings.ToLower(name)
	return name == zone || strings.HasSuffix(name, "."+zone)
}

// forward asks each upstream in turn (UDP, then TCP when truncated, over
// TCP when the query came so); REFUSED without upstreams, SERVFAIL when none
// answers.
func (h *handler) forward(network string, req *dns.Msg) *dns.Msg {
	if len(h.upstream) == 0 {
		return new(dns.Msg).SetRcode(req, dns.RcodeRefused)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	for _, up := range h.upstream {
		c := &dns.Client{Net: network, Timeout: 2 * time.Second}
		resp, _, err := c.ExchangeContext(ctx, req, up)
		if err == nil && resp.Truncated && network == "udp" {
			c.Net = "tcp"
			resp, _, err = c.ExchangeContext(ctx, req, up)
		}
		if err == nil {
			return resp
		}
	}
	return new(dns.Msg).SetRcode(req, dns.RcodeServerFailure)
}
