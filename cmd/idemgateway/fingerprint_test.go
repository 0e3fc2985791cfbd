package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestFingerprintCommand(t *testing.T) {
	raw := "POST /rest/api/3/issue HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: k1\r\nContent-Length: 86\r\n\r\n" +
		`{"fields":{"project":{"key":"OPS"},"summary":"Disk full","issuetype":{"name":"Task"}}}`
	var fromRaw, fromFlags bytes.Buffer
	if err := fingerprint([]string{"-routes", "../../examples/routes.yaml", "-route", "jira_create_issue", "-explain"}, strings.NewReader(raw), &fromRaw); err != nil {
		t.Fatal(err)
	}
	if err := fingerprint([]string{"-routes", "../../examples/routes.yaml", "-route", "jira_create_issue", "-method", "POST", "-path", "/rest/api/3/issue",
		"-H", "Content-Type: application/json", "-H", "Idempotency-Key: k1",
		"-body", `{ "fields": {"summary":"Disk full","issuetype":{"name":"Task"},"project":{"key":"OPS"}} }`}, nil, &fromFlags); err != nil {
		t.Fatal(err)
	}
	var a, b struct {
		Fingerprint string `json:"fingerprint"`
		Key         string `json:"key"`
		Steps       []struct{ Pointer, Action string }
	}
	if err := json.Unmarshal(fromRaw.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fromFlags.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.Fingerprint, "sha256:") || a.Fingerprint != b.Fingerprint {
		t.Fatalf("fingerprints %q and %q: want one, the same", a.Fingerprint, b.Fingerprint)
	}
	if a.Key != "k1" || b.Key != "k1" {
		t.Fatalf("keys %q and %q, want k1", a.Key, b.Key)
	}
	if len(a.Steps) == 0 || len(b.Steps) != 0 {
		t.Fatalf("steps: %d with -explain, %d without", len(a.Steps), len(b.Steps))
	}
	for _, bad := range [][]string{
		{"-routes", "../../examples/routes.yaml"},
		{"-routes", "../../examples/routes.yaml", "-route", "nope", "-method", "POST", "-path", "/x"},
		{"-routes", "../../examples/routes.yaml", "-route", "jira_create_issue", "-method", "POST", "-path", "/elsewhere"},
		{"-routes", "../../examples/routes.yaml", "-route", "jira_create_issue", "-method", "POST", "-path", "/rest/api/3/issue",
			"-H", "Content-Type: application/json", "-body", `{"a":1,"a":2}`},
	} {
		if err := fingerprint(bad, strings.NewReader(""), &bytes.Buffer{}); err == nil {
			t.Errorf("fingerprint %q succeeded", bad)
		}
	}
}
