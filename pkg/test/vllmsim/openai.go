// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package vllmsim

import (
	"encoding/json"
	"strings"
)

// Object kinds, as vLLM writes them in the "object" field.
const (
	ObjectTextCompletion = "text_completion"
	ObjectChatCompletion = "chat.completion"
	ObjectChatChunk      = "chat.completion.chunk"
	ObjectList           = "list"
	ObjectModel          = "model"
)

// Finish reasons: "stop" when the answer ended on its own, "length" when
// max_tokens cut it.
const (
	FinishStop   = "stop"
	FinishLength = "length"
)

// Usage counts tokens (whitespace-separated words here) of one request.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// CompletionChoice is one choice of a /v1/completions answer or stream chunk;
// FinishReason is null until the last token.
type CompletionChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

// CompletionResponse is the body of a /v1/completions answer (Object
// "text_completion", ID "cmpl-...") and of each of its stream chunks; Created
// is Unix seconds; Usage is set on whole answers and on the usage-only last
// chunk that stream_options.include_usage asks for (whose Choices is empty).
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// ChatMessage is a chat message or stream delta; in deltas, absent fields mean
// "no change" (the last delta is {}).
type ChatMessage struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// ChatChoice is one choice of a chat answer (Message set) or stream chunk
// (Delta set); FinishReason is null until the last token.
type ChatChoice struct {
	Index        int          `json:"index"`
	Message      *ChatMessage `json:"message,omitempty"`
	Delta        *ChatMessage `json:"delta,omitempty"`
	Logprobs     any          `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

// ChatCompletionResponse is the body of a /v1/chat/completions answer (Object
// "chat.completion") or stream chunk (Object "chat.completion.chunk"); ID is
// "chatcmpl-...", Created Unix seconds, Usage as in [CompletionResponse].
type ChatCompletionResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

// ModelCard is one entry of /v1/models. Root is the model itself; Parent is
// null for the base model and the base model's name for an adapter.
type ModelCard struct {
	ID      string  `json:"id"`
	Object  string  `json:"object"`
	Created int64   `json:"created"`
	OwnedBy string  `json:"owned_by"`
	Root    string  `json:"root"`
	Parent  *string `json:"parent"`
}

// ModelList is the body of /v1/models: Object "list", base model first.
type ModelList struct {
	Object string      `json:"object"`
	Data   []ModelCard `json:"data"`
}

// APIError is the payload of an error answer. Type is the OpenAI client's
// class name for the status (NotFoundError for 404, BadRequestError for 400,
// ...); Code repeats the HTTP status.
type APIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// ErrorResponse is the body of every error answer of the OpenAI endpoints.
type ErrorResponse struct {
	Error APIError `json:"error"`
}

// inferenceRequest is the part of a completions or chat request the simulator reads.
type inferenceRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatInput     `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type chatInput struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// promptTokens counts the words of a completions prompt: a string, a list of
// strings, a token-id list, or a list of token-id lists.
func promptTokens(raw json.RawMessage) int {
	if len(raw) == 0 {
		return 0
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return len(strings.Fields(s))
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		n := 0
		for _, s := range ss {
			n += len(strings.Fields(s))
		}
		return n
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return len(ids)
	}
	var idss [][]int
	if json.Unmarshal(raw, &idss) == nil {
		n := 0
		for _, ids := range idss {
			n += len(ids)
		}
		return n
	}
	return 0
}

// messageTokens counts the words of chat messages whose content is a string or
// a list of {"type":"text","text":...} parts.
func messageTokens(msgs []chatInput) int {
	n := 0
	for _, m := range msgs {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			n += len(strings.Fields(s))
			continue
		}
		var parts []struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) == nil {
			for _, p := range parts {
				n += len(strings.Fields(p.Text))
			}
		}
	}
	return n
}

// vocabulary is cycled through to make answers; deterministic on purpose.
var vocabulary = strings.Fields("the simulated model server answers every request with these same words in this order")

// generate returns the answer's tokens (each but the first with a leading
// space, so they concatenate to the text) and its finish reason.
func generate(outputTokens int, maxTokens *int) ([]string, string) {
	n, reason := outputTokens, FinishStop
	if maxTokens != nil && *maxTokens >= 0 && *maxTokens < n {
		n, reason = *maxTokens, FinishLength
	}
	toks := make([]string, n)
	for i := range toks {
		w := vocabulary[i%len(vocabulary)]
		if i > 0 {
			w = " " + w
		}
		toks[i] = w
	}
	return toks, reason
}

// errorType maps an HTTP status to the OpenAI client's error class name.
func errorType(status int) string {
	switch status {
	case 400:
		return "BadRequestError"
	case 404:
		return "NotFoundError"
	case 405:
		return "MethodNotAllowedError"
	case 503:
		return "ServiceUnavailableError"
	}
	if status >= 500 {
		return "InternalServerError"
	}
	return "BadRequestError"
}
