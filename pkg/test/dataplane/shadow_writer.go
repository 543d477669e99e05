// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"context"
	"io"
	"time"

	"github.com/infermesh/infermesh/pkg/test/dataplane/extproc"
)

// mirror sends a copy of the request to each mirror cluster (sampled by
// runtime_fraction's default_value), with "-shadow" appended to the host
// before its port (shadowAppendedHost in source/common/router/
// shadow_writer_impl.cc, which finds the port as getPortStart does), and
// discards the answer (ShadowWriterImpl::shadow: fire and forget).
func (dp *DataPlane) mirror(ac *activeConfig, r *route, req *extproc.Request, body []byte) {
	for _, m := range r.mirrors {
		if m.denominator > 0 && dp.randUnder(m.denominator) >= m.numerator {
			continue
		}
		c := ac.clusters[m.cluster]
		if c == nil || len(c.addrs) == 0 {
			continue
		}
		host := c.rt.roundRobin(c.addrs)
		cp := &extproc.Request{Method: req.Method, Path: req.Path, Scheme: req.Scheme, Headers: req.Headers.Clone()}
		cp.Authority = shadowHost(req.Authority)
		go func() {
			// Fire and forget, bounded by the cluster's connect timeout and
			// a fixed deadline.
			ctx, cancel := context.WithTimeout(context.Background(), mirrorTimeout)
			defer cancel()
			if resp, failure := dp.attempt(ctx, c, host, cp, bytes.NewReader(body)); failure == "" {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
}

// shadowHost is Envoy's shadowAppendedHost: "-shadow" before the port
// (hostPortStart), else at the end; "[::1]:80" becomes "[::1]-shadow:80".
func shadowHost(host string) string {
	if i := hostPortStart(host); i >= 0 {
		return host[:i] + "-shadow" + host[i:]
	}
	return host + "-shadow"
}

// mirrorTimeout bounds a mirrored request.
const mirrorTimeout = 10 * time.Second
