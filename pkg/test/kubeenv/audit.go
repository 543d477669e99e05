// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"time"
)

// AuditEvent is one entry of kube-apiserver's audit log, reduced to what tests
// check: who did what to which object, and how it ended.
type AuditEvent struct {
	AuditID string
	// Stage is ResponseComplete for an ordinary request; a watch or other
	// long-running request also logs ResponseStarted when it begins; Panic if
	// the handler panicked.
	Stage     string
	User      string
	Groups    []string
	UserAgent string
	// Verb is the Kubernetes verb: get, list, watch, create, update, patch,
	// delete or deletecollection (or the HTTP method in lower case for
	// non-resource URLs such as /readyz).
	Verb        string
	APIGroup    string // "" for the core group
	APIVersion  string
	Resource    string // plural, for example "pods"; "" for non-resource URLs
	Namespace   string
	Name        string
	Subresource string // for example "status" or "binding"
	// FieldManager is the fieldManager query parameter of the request URI, if
	// any (server-side apply and most client-go writes set it).
	FieldManager string
	RequestURI   string
	// Code is the HTTP response code, 0 if the event has none (ResponseStarted).
	Code int
	// Received is when the apiserver received the request.
	Received time.Time
}

// IsWrite reports whether the event is a request that can change an object.
func (e AuditEvent) IsWrite() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// rawAuditEvent is the part of audit.k8s.io/v1 Event that AuditEvent keeps.
type rawAuditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// AuditEvents reads the audit log as it is now, in the order the apiserver
// wrote it (across restarts). The apiserver logs a request after its response
// completes, so poll with a bound for an expected event. A last line still
// being written is left for the next call. The error wraps a read error or
// names the line that does not parse.
func (e *Env) AuditEvents() ([]AuditEvent, error) {
	data, err := os.ReadFile(e.AuditLog)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kubeenv: audit log: %w", err)
	}
	return ParseAuditLog(data)
}

// ParseAuditLog parses JSON-lines audit events (format json of
// --audit-log-path). Text after the last newline, an event still being
// written, is ignored; so are empty lines.
func ParseAuditLog(data []byte) ([]AuditEvent, error) {
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var out []AuditEvent
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var raw rawAuditEvent
		if err := json.Unmarshal(line, &raw); err != nil {
			return nil, fmt.Errorf("kubeenv: audit log line %d: %w", n+1, err)
		}
		out = append(out, raw.event())
	}
	return out, nil
}

func (r rawAuditEvent) event() AuditEvent {
	ev := AuditEvent{
		AuditID:    r.AuditID,
		Stage:      r.Stage,
		User:       r.User.Username,
		Groups:     r.User.Groups,
		UserAgent:  r.UserAgent,
		Verb:       r.Verb,
		RequestURI: r.RequestURI,
		Received:   r.RequestReceivedTimestamp,
	}
	if o := r.ObjectRef; o != nil {
		ev.APIGroup, ev.APIVersion, ev.Resource = o.APIGroup, o.APIVersion, o.Resource
		ev.Namespace, ev.Name, ev.Subresource = o.Namespace, o.Name, o.Subresource
	}
	if r.ResponseStatus != nil {
		ev.Code = r.ResponseStatus.Code
	}
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		ev.FieldManager = u.Query().Get("fieldManager")
	}
	return ev
}
