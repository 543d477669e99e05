// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package kubeenv

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Two complete events as kube-apiserver v1.37 writes them at Metadata level,
// then half of a third one still being written.
const auditSample = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns/pods/p1/status?fieldManager=kubeenv-kubelet","verb":"update","user":{"username":"kubeenv-admin","uid":"1","groups":["system:masters","system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"kubeenv-test","objectRef":{"resource":"pods","namespace":"ns","name":"p1","apiVersion":"v1","subresource":"status"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-29T23:00:00.000001Z","stageTimestamp":"2026-11-29T23:00:00.002000Z"}

{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a2","stage":"ResponseComplete","requestURI":"/readyz","verb":"get","user":{"username":"system:anonymous","groups":["system:unauthenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"Go-http-client/1.1","responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-29T23:00:01Z","stageTimestamp":"2026-11-29T23:00:01Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a3","sta`

func TestParseAuditLog(t *testing.T) {
	got, err := ParseAuditLog([]byte(auditSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []AuditEvent{{
		AuditID: "a1", Stage: "ResponseComplete", User: "kubeenv-admin",
		Groups: []string{"system:masters", "system:authenticated"}, UserAgent: "kubeenv-test",
		Verb: "update", APIVersion: "v1", Resource: "pods", Namespace: "ns", Name: "p1", Subresource: "status",
		FieldManager: "kubeenv-kubelet",
		RequestURI:   "/api/v1/namespaces/ns/pods/p1/status?fieldManager=kubeenv-kubelet",
		Code:         200, Received: time.Date(2026, 11, 29, 23, 0, 0, 1000, time.UTC),
	}, {
		AuditID: "a2", Stage: "ResponseComplete", User: "system:anonymous",
		Groups: []string{"system:unauthenticated"}, UserAgent: "Go-http-client/1.1",
		Verb: "get", RequestURI: "/readyz", Code: 200, Received: time.Date(2026, 11, 29, 23, 0, 1, 0, time.UTC),
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseAuditLog (-want +got):\n%s", diff)
	}
	if !got[0].IsWrite() || got[1].IsWrite() {
		t.Errorf("IsWrite: update %v, get %v; want true, false", got[0].IsWrite(), got[1].IsWrite())
	}
}

func TestParseAuditLogBadLine(t *testing.T) {
	if _, err := ParseAuditLog([]byte("{}\nnot json\n")); err == nil {
		t.Fatal("ParseAuditLog accepted a line that is not JSON")
	}
}
