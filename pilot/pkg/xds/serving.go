// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"slices"
	"strings"
	"sync"

	"github.com/infermesh/infermesh/pilot/pkg/model"
)

// ServingSink receives, per Gateway, what the push path does not serve as
// translated: Update with a Gateway that has refusals, Delete (by
// "namespace/name") when it is served in full again or deleted.
// krt.StaticCollection[model.GatewayServing] is one; pilot/pkg/bootstrap
// hands the same collection to the controller, whose Gateway status reads
// it (architecture/xds.md, "Serving what is valid").
type ServingSink interface {
	ConditionalUpdateObject(model.GatewayServing)
	DeleteObject(key string)
}

// servingStatus is the push path's record of what it refused per Gateway:
// the source of /debug/syncz's refused field, of the gauge
// infermesh_xds_gateway_invalid_resources{gateway}, of /healthz/config and
// of the ServingSink. The push goroutine writes it; any goroutine reads it.
type servingStatus struct {
	metrics *metrics
	sink    ServingSink

	mu        sync.Mutex
	byGateway map[string][]model.RefusedResource
}

func newServingStatus(m *metrics, sink ServingSink) *servingStatus {
	return &servingStatus{metrics: m, sink: sink, byGateway: map[string][]model.RefusedResource{}}
}

// set records refused for the Gateway key ("namespace/name"); empty clears
// it.
func (s *servingStatus) set(key string, refused []model.RefusedResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.byGateway[key]
	if len(refused) == 0 {
		if !had {
			return
		}
		delete(s.byGateway, key)
		s.metrics.invalid.DeleteLabelValues(key)
		if s.sink != nil {
			s.sink.DeleteObject(key)
		}
		return
	}
	if had && slices.Equal(old, refused) {
		return
	}
	s.byGateway[key] = refused
	s.metrics.invalid.WithLabelValues(key).Set(float64(len(refused)))
	if s.sink != nil {
		ns, name, _ := strings.Cut(key, "/")
		s.sink.ConditionalUpdateObject(model.GatewayServing{Namespace: ns, Name: name, Refused: refused})
	}
}

// get returns what is refused of the Gateway key (nil: nothing).
func (s *servingStatus) get(key string) []model.RefusedResource {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.byGateway[key])
}

// counts returns, per Gateway with refusals, how many.
func (s *servingStatus) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.byGateway))
	for k, v := range s.byGateway {
		out[k] = len(v)
	}
	return out
}
