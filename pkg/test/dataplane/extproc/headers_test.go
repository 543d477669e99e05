// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package extproc

import (
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func set(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}}
}

func TestApplyHeaderMutationDefaultRules(t *testing.T) {
	m := requestHeaderMap("GET", "/a", "h.example", "http", http.Header{"X-Keep": {"1"}, "X-Drop": {"1"}, "X-Multi": {"a"}})
	appendMulti := set("x-multi", "b")
	//lint:ignore SA1019 the legacy append flag is what this case exercises
	appendMulti.Append = wrapperspb.Bool(true)
	absent := set("x-keep", "2")
	absent.AppendAction = corev3.HeaderValueOption_ADD_IF_ABSENT
	c := &Counters{}
	err := applyHeaderMutation(&extprocsvc.HeaderMutation{
		RemoveHeaders: []string{"x-drop", ":method", "host"},
		SetHeaders: []*corev3.HeaderValueOption{
			set(":path", "/b"),        // allowed
			set(":authority", "evil"), // routing header: ignored
			set("Host", "evil"),       // is :authority: ignored
			set("x-envoy-foo", "1"),   // envoy header: ignored
			set("x-new", "v"),         // allowed
			appendMulti, absent,
		},
	}, &m, MutationRules{}, c)
	if err != nil {
		t.Fatal(err)
	}
	want := headerMap{{":authority", "h.example"}, {":path", "/b"}, {":method", "GET"}, {":scheme", "http"},
		{"x-keep", "1"}, {"x-multi", "a"}, {"x-new", "v"}, {"x-multi", "b"}}
	if diff := cmp.Diff(want, m, cmp.AllowUnexported(field{})); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if got := c.RejectedHeaderMutations.Load(); got != 5 {
		t.Errorf("rejected = %d, want 5 (remove :method, remove host, :authority, host, x-envoy-foo)", got)
	}
	if err := applyHeaderMutation(&extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("bad\nname", "v")}}, &m, MutationRules{}, c); err == nil {
		t.Error("invalid header name accepted")
	}
}
