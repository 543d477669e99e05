// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const seedPrompt = `{"model": "reviews-1", "prompt": "What do reviewers think about The Comedy of Errors?", "max_tokens": 100, "temperature": 0}`

// words8 is the answer of DefaultOutputTokens tokens.
const words8 = "the simulated model server answers every request with"

func portOf(s *Server) string {
	_, p, _ := net.SplitHostPort(s.Addr().String())
	return p
}

func TestCompletion(t *testing.T) {
	s := Run(t, "", seedConfig("vllm-llama3-8b-0"))
	c := client(t)

	r := mustDo(t, c, http.MethodPost, s.URL()+"/v1/completions", seedPrompt)
	if r.status != http.StatusOK {
		t.Fatalf("status %d, body %s", r.status, r.body)
	}
	checkPodHeaders(t, r, "vllm-llama3-8b-0", portOf(s))
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	got := decode[CompletionResponse](t, r.body)
	if !strings.HasPrefix(got.ID, "cmpl-") {
		t.Errorf("id %q lacks cmpl- prefix", got.ID)
	}
	stop := FinishStop
	want := CompletionResponse{
		ID: got.ID, Object: "text_completion", Created: epoch.Unix(), Model: "reviews-1",
		Choices: []CompletionChoice{{Index: 0, Text: words8, FinishReason: &stop}},
		Usage:   &Usage{PromptTokens: 9, CompletionTokens: 8, TotalTokens: 17},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("completion (-want +got):\n%s", d)
	}
	// The raw JSON has the OpenAI keys, logprobs and finish_reason included.
	var raw struct {
		Choices []map[string]json.RawMessage `json:"choices"`
	}
	_ = json.Unmarshal(r.body, &raw)
	for _, k := range []string{"index", "text", "logprobs", "finish_reason"} {
		if _, ok := raw.Choices[0][k]; !ok {
			t.Errorf("choice lacks %q: %s", k, r.body)
		}
	}
	if st := s.Stats(); st.Served != 1 || st.Received != 1 || st.Running != 0 {
		t.Errorf("stats after one answer: %+v", st)
	}
}

func TestCompletionMaxTokensCutsWithLength(t *testing.T) {
	s := Run(t, "", seedConfig("p"))
	r := mustDo(t, client(t), http.MethodPost, s.URL()+"/v1/completions",
		`{"model": "meta-llama/Llama-3.1-8B-Instruct", "prompt": "hi there", "max_tokens": 3}`)
	got := decode[CompletionResponse](t, r.body)
	if got.Choices[0].Text != "the simulated model" || *got.Choices[0].FinishReason != FinishLength {
		t.Errorf("choice %+v, finish %q", got.Choices[0], *got.Choices[0].FinishReason)
	}
	if *got.Usage != (Usage{PromptTokens: 2, CompletionTokens: 3, TotalTokens: 5}) {
		t.Errorf("usage %+v", *got.Usage)
	}
}

func TestChatCompletion(t *testing.T) {
	s := Run(t, "", seedConfig("p"))
	r := mustDo(t, client(t), http.MethodPost, s.URL()+"/v1/chat/completions",
		`{"model": "reviews-1", "messages": [{"role": "system", "content": "be brief"},
		  {"role": "user", "content": [{"type": "text", "text": "how are you"}]}], "max_completion_tokens": 4}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d, body %s", r.status, r.body)
	}
	got := decode[ChatCompletionResponse](t, r.body)
	if !strings.HasPrefix(got.ID, "chatcmpl-") {
		t.Errorf("id %q lacks chatcmpl- prefix", got.ID)
	}
	text, length := "the simulated model server", FinishLength
	want := ChatCompletionResponse{
		ID: got.ID, Object: "chat.completion", Created: epoch.Unix(), Model: "reviews-1",
		Choices: []ChatChoice{{Message: &ChatMessage{Role: "assistant", Content: &text}, FinishReason: &length}},
		Usage:   &Usage{PromptTokens: 5, CompletionTokens: 4, TotalTokens: 9},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("chat completion (-want +got):\n%s", d)
	}
}

func TestEmptyModelMeansBaseModel(t *testing.T) {
	s := Run(t, "", seedConfig("p"))
	r := mustDo(t, client(t), http.MethodPost, s.URL()+"/v1/completions", `{"prompt": "x"}`)
	if got := decode[CompletionResponse](t, r.body); r.status != 200 || got.Model != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Errorf("status %d, model %q", r.status, got.Model)
	}
}

func TestStreamCompletion(t *testing.T) {
	s := Run(t, "", seedConfig("p"))
	r := mustDo(t, client(t), http.MethodPost, s.URL()+"/v1/completions",
		`{"model": "reviews-1", "prompt": "a b", "stream": true, "stream_options": {"include_usage": true}}`)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", r.status, r.header.Get("Content-Type"))
	}
	checkPodHeaders(t, r, "p", portOf(s))
	events := sseEvents(t, r.body)
	if n := len(events); n != 8+1+1 {
		t.Fatalf("%d events, want 8 token chunks, 1 usage chunk, [DONE]:\n%s", n, r.body)
	}
	if events[len(events)-1] != "[DONE]" {
		t.Errorf("last event %q, want [DONE]", events[len(events)-1])
	}
	var text strings.Builder
	id := ""
	for i, e := range events[:8] {
		c := decode[CompletionResponse](t, []byte(e))
		if c.Object != "text_completion" || c.Model != "reviews-1" || c.Usage != nil || len(c.Choices) != 1 {
			t.Errorf("chunk %d: %s", i, e)
		}
		if id == "" {
			id = c.ID
		} else if c.ID != id {
			t.Errorf("chunk %d id %q, first was %q", i, c.ID, id)
		}
		if fr := c.Choices[0].FinishReason; (i == 7) != (fr != nil) {
			t.Errorf("chunk %d finish_reason %v: only the last token's chunk has one", i, fr)
		}
		text.WriteString(c.Choices[0].Text)
	}
	if text.String() != words8 {
		t.Errorf("streamed text %q, want %q", text.String(), words8)
	}
	u := decode[CompletionResponse](t, []byte(events[8]))
	if len(u.Choices) != 0 || u.Usage == nil || *u.Usage != (Usage{PromptTokens: 2, CompletionTokens: 8, TotalTokens: 10}) {
		t.Errorf("usage chunk %s", events[8])
	}
	if st := s.Stats(); st.Served != 1 || st.Running != 0 {
		t.Errorf("stats after [DONE]: %+v", st)
	}
}

func TestStreamChat(t *testing.T) {
	s := Run(t, "", seedConfig("p"))
	r := mustDo(t, client(t), http.MethodPost, s.URL()+"/v1/chat/completions",
		`{"model": "meta-llama/Llama-3.1-8B-Instruct", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": true}`)
	events := sseEvents(t, r.body)
	want := []string{
		`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`,
		`{"index":0,"delta":{"content":"the"},"logprobs":null,"finish_reason":null}`,
		`{"index":0,"delta":{"content":" simulated"},"logprobs":null,"finish_reason":"length"}`,
	}
	if len(events) != len(want)+1 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q, want %d chunks then [DONE]", events, len(want))
	}
	for i, e := range events[:len(want)] {
		var c struct {
			Object  string            `json:"object"`
			Choices []json.RawMessage `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil || c.Object != "chat.completion.chunk" || len(c.Choices) != 1 {
			t.Fatalf("chunk %d: %s (%v)", i, e, err)
		}
		if got := string(c.Choices[0]); got != want[i] {
			t.Errorf("chunk %d choice\n got %s\nwant %s", i, got, want[i])
		}
	}
}

func TestUnknownModelIs404(t *testing.T) {
	s := Run(t, "", seedConfig("p"))
	c := client(t)
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		r := mustDo(t, c, http.MethodPost, s.URL()+path,
			`{"model": "reviews-2", "prompt": "x", "messages": [{"role": "user", "content": "x"}]}`)
		if r.status != http.StatusNotFound {
			t.Errorf("%s: status %d", path, r.status)
		}
		checkPodHeaders(t, r, "p", portOf(s))
		want := `{"error":{"message":"The model ` + "`reviews-2`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}}`
		if got := strings.TrimSpace(string(r.body)); got != want {
			t.Errorf("%s: body\n got %s\nwant %s", path, got, want)
		}
	}
	if st := s.Stats(); st.Received != 2 || st.Served != 0 {
		t.Errorf("stats %+v: rejected requests are received, not served", st)
	}
}

func TestBadJSONIs400(t *testing.T) {
	s := Run(t, "", seedConfig("p"))
	r := mustDo(t, client(t), http.MethodPost, s.URL()+"/v1/completions", `{"model":`)
	e := decode[ErrorResponse](t, r.body)
	if r.status != http.StatusBadRequest || e.Error.Type != "BadRequestError" || e.Error.Code != 400 {
		t.Errorf("status %d, error %+v", r.status, e.Error)
	}
}

func TestLastRequest(t *testing.T) {
	s := Run(t, "", seedConfig("p"))
	if _, ok := s.LastRequest(); ok {
		t.Fatal("LastRequest before any request")
	}
	c := client(t)
	mustDo(t, c, http.MethodPost, s.URL()+"/v1/completions", seedPrompt, "X-Gateway-Destination-Endpoint", "10.0.0.1:8000")
	mustDo(t, c, http.MethodGet, s.URL()+"/metrics", "") // not an inference request: not recorded
	got, ok := s.LastRequest()
	if !ok || got.Method != http.MethodPost || got.Path != "/v1/completions" || string(got.Body) != seedPrompt {
		t.Fatalf("LastRequest = %+v, %v", got, ok)
	}
	if h := got.Header.Get("x-gateway-destination-endpoint"); h != "10.0.0.1:8000" {
		t.Errorf("recorded header %q", h)
	}
	got.Body[0] = 'X' // a copy: the next read is unchanged
	if again, _ := s.LastRequest(); string(again.Body) != seedPrompt {
		t.Errorf("LastRequest shares its body with callers")
	}
}
