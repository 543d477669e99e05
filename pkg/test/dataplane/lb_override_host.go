// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	overridehostv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// hostPicker is the load balancer for one request: override_host walks the
// metadata's host list across attempts, skipping hosts not in the cluster,
// then falls back to round robin.
type hostPicker struct {
	dp       *DataPlane
	c        *activeCluster
	override []string
	next     int
}

func newHostPicker(dp *DataPlane, c *activeCluster, md map[string]*structpb.Struct) *hostPicker {
	p := &hostPicker{dp: dp, c: c}
	oh := c.rt.cfg.overrideHost
	if oh == nil {
		return p
	}
	for _, src := range oh.sources {
		v := lookupMetadata(md, src)
		if v == "" {
			continue
		}
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				p.override = append(p.override, h)
			}
		}
		break // the first source that has hosts
	}
	return p
}

// pick returns the host for the next attempt.
func (p *hostPicker) pick() (string, bool) {
	if len(p.c.addrs) == 0 {
		return "", false
	}
	for p.next < len(p.override) {
		h := p.override[p.next]
		p.next++
		for _, a := range p.c.addrs {
			if a == h {
				return h, true
			}
		}
	}
	if p.c.rt.cfg.overrideHost != nil {
		p.dp.counters.fallbacks.Add(1)
	}
	return p.c.rt.roundRobin(p.c.addrs), true
}

func lookupMetadata(md map[string]*structpb.Struct, k metadataPath) string {
	s := md[k.namespace]
	if s == nil {
		return ""
	}
	var v *structpb.Value = structpb.NewStructValue(s)
	for _, seg := range k.path {
		v = v.GetStructValue().GetFields()[seg]
	}
	return v.GetStringValue()
}

// servedMetadata is the selected_host_key metadata of override_host.
func servedMetadata(oh *overrideHostPolicy, host string) map[string]*structpb.Struct {
	if oh == nil || oh.selected == nil {
		return nil
	}
	var v *structpb.Value = structpb.NewStringValue(host)
	for i := len(oh.selected.path) - 1; i >= 0; i-- {
		v = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{oh.selected.path[i]: v}})
	}
	s := v.GetStructValue()
	if s == nil {
		return nil
	}
	return map[string]*structpb.Struct{oh.selected.namespace: s}
}

// overrideHostPolicy is OverrideHost with metadata sources and a round
// robin fallback.
type overrideHostPolicy struct {
	sources  []metadataPath
	selected *metadataPath
}

// metadataPath is an envoy.type.metadata.v3.MetadataKey: a dynamic
// metadata namespace and a path of struct keys inside it.
type metadataPath struct {
	namespace string
	path      []string
}

// compileLBPolicy takes the first policy (Envoy uses the first one it
// supports; ours are override_host and round_robin). nil means round robin.
func compileLBPolicy(p *clusterv3.LoadBalancingPolicy) (*overrideHostPolicy, error) {
	if len(p.GetPolicies()) == 0 {
		return nil, errors.New("no policies")
	}
	tec := p.GetPolicies()[0].GetTypedExtensionConfig()
	msg, err := tec.GetTypedConfig().UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tec.GetName(), err)
	}
	switch cfg := msg.(type) {
	case *roundrobinv3.RoundRobin:
		return nil, nil
	case *overridehostv3.OverrideHost:
		oh := &overrideHostPolicy{}
		for _, s := range cfg.GetOverrideHostSources() {
			if s.GetMetadata() == nil {
				return nil, errors.New("override_host: only metadata sources are implemented")
			}
			oh.sources = append(oh.sources, toMetadataPath(s.GetMetadata()))
		}
		if k := cfg.GetSelectedHostKey(); k != nil {
			mp := toMetadataPath(k)
			oh.selected = &mp
		}
		fb, err := compileLBPolicy(cfg.GetFallbackPolicy())
		if err != nil {
			return nil, fmt.Errorf("override_host fallback_policy: %w", err)
		}
		if fb != nil {
			return nil, errors.New("override_host fallback_policy: only round_robin is implemented")
		}
		return oh, nil
	default:
		return nil, fmt.Errorf("load balancing policy %s (%T) not implemented", tec.GetName(), msg)
	}
}

func toMetadataPath(k *metadatav3.MetadataKey) metadataPath {
	mp := metadataPath{namespace: k.GetKey()}
	for _, seg := range k.GetPath() {
		mp.path = append(mp.path, seg.GetKey())
	}
	return mp
}
