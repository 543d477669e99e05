// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// answer is everything needed to write one inference answer.
type answer struct {
	chat         bool
	id           string
	created      int64
	model        string
	tokens       []string
	finish       string
	usage        Usage
	includeUsage bool
}

// inference serves /v1/completions (chat false) and /v1/chat/completions.
func (s *Server) inference(w http.ResponseWriter, r *http.Request, chat bool) {
	body, err := s.readRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "could not read the request body: "+err.Error())
		return
	}
	var req inferenceRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	lora, ok := s.servesModel(req.Model)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	a := answer{chat: chat, created: s.cfg.Now().Unix(), model: req.Model}
	if a.model == "" {
		a.model = s.cfg.Model
	}
	maxTokens := req.MaxTokens
	prompt := promptTokens(req.Prompt)
	a.id = newID("cmpl-")
	if chat {
		if req.MaxCompletionTokens != nil {
			maxTokens = req.MaxCompletionTokens
		}
		prompt = messageTokens(req.Messages)
		a.id = newID("chatcmpl-")
	}
	a.tokens, a.finish = generate(s.cfg.OutputTokens, maxTokens)
	a.usage = Usage{PromptTokens: prompt, CompletionTokens: len(a.tokens), TotalTokens: prompt + len(a.tokens)}
	a.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage

	j := &job{lora: lora, blocks: (a.usage.TotalTokens + s.cfg.BlockSize - 1) / s.cfg.BlockSize}
	if err := s.eng.admit(r.Context(), j); err != nil {
		s.failed(w, err)
		return
	}
	if err := s.eng.hold(r.Context(), r.Header.Get(HoldHeader)); err != nil {
		s.eng.finish(j, false)
		s.failed(w, err)
		return
	}
	if err := s.eng.delay(r.Context(), s.cfg.Latency); err != nil {
		s.eng.finish(j, false)
		s.failed(w, err)
		return
	}
	if req.Stream {
		s.stream(w, j, a)
		return
	}
	var out any
	if chat {
		text := strings.Join(a.tokens, "")
		out = ChatCompletionResponse{ID: a.id, Object: ObjectChatCompletion, Created: a.created, Model: a.model,
			Choices: []ChatChoice{{Message: &ChatMessage{Role: "assistant", Content: &text}, FinishReason: &a.finish}},
			Usage:   &a.usage}
	} else {
		out = CompletionResponse{ID: a.id, Object: ObjectTextCompletion, Created: a.created, Model: a.model,
			Choices: []CompletionChoice{{Text: strings.Join(a.tokens, ""), FinishReason: &a.finish}},
			Usage:   &a.usage}
	}
	s.eng.finish(j, true) // before writing: a client holding the answer sees it served
	writeJSON(w, http.StatusOK, out)
}

// failed answers a request that was dropped while waiting or held: 503 if the
// server is closing; nothing if the client went away.
func (s *Server) failed(w http.ResponseWriter, err error) {
	if errors.Is(err, errClosed) {
		writeError(w, http.StatusServiceUnavailable, "the model server is shutting down")
	}
}

// stream writes a as Server-Sent Events: one chunk per token (a chat stream
// first sends the assistant role), the finish reason on the last token's
// chunk, an optional usage-only chunk, then [DONE].
func (s *Server) stream(w http.ResponseWriter, j *job, a answer) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) bool {
		b, err := json.Marshal(v)
		if err == nil {
			_, err = fmt.Fprintf(w, "data: %s\n\n", b)
		}
		if err == nil {
			if err = rc.Flush(); errors.Is(err, http.ErrNotSupported) {
				err = nil
			}
		}
		return err == nil
	}
	var chunks []any
	if a.chat {
		empty := ""
		chunks = append(chunks, a.chatChunk(ChatChoice{Delta: &ChatMessage{Role: "assistant", Content: &empty}}))
	}
	for i, tok := range a.tokens {
		var finish *string
		if i == len(a.tokens)-1 {
			finish = &a.finish
		}
		if a.chat {
			chunks = append(chunks, a.chatChunk(ChatChoice{Delta: &ChatMessage{Content: &tok}, FinishReason: finish}))
		} else {
			chunks = append(chunks, a.textChunk([]CompletionChoice{{Text: tok, FinishReason: finish}}, nil))
		}
	}
	if len(a.tokens) == 0 { // nothing generated: the finish reason still arrives
		if a.chat {
			chunks = append(chunks, a.chatChunk(ChatChoice{Delta: &ChatMessage{}, FinishReason: &a.finish}))
		} else {
			chunks = append(chunks, a.textChunk([]CompletionChoice{{FinishReason: &a.finish}}, nil))
		}
	}
	if a.includeUsage {
		if a.chat {
			c := a.chatChunk()
			c.Choices, c.Usage = []ChatChoice{}, &a.usage
			chunks = append(chunks, c)
		} else {
			chunks = append(chunks, a.textChunk([]CompletionChoice{}, &a.usage))
		}
	}
	for _, c := range chunks {
		if !send(c) {
			s.eng.finish(j, false)
			return
		}
	}
	s.eng.finish(j, true) // before [DONE]: a client that saw [DONE] sees it served
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

func (a answer) chatChunk(choices ...ChatChoice) ChatCompletionResponse {
	return ChatCompletionResponse{ID: a.id, Object: ObjectChatChunk, Created: a.created, Model: a.model, Choices: choices}
}

func (a answer) textChunk(choices []CompletionChoice, u *Usage) CompletionResponse {
	return CompletionResponse{ID: a.id, Object: ObjectTextCompletion, Created: a.created, Model: a.model, Choices: choices, Usage: u}
}
