package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestJiraAddAttachment: POST /rest/api/3/issue/{id}/attachments attaches the "file" parts of a
// multipart body to an existing issue, one effect per request, answering the attachments; without
// X-Atlassian-Token, to an unknown issue, or without a file part it acts not.
func TestJiraAddAttachment(t *testing.T) {
	t.Parallel()
	s, srv := newTestSandbox(t)
	c := srv.Client()
	send(t, c, srv.URL, creates[0].req) // OPS-1
	const ct = "multipart/form-data; boundary=b"
	twoFiles := "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\nContent-Type: application/pdf\r\n\r\n%PDF\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.txt\"\r\n\r\nhello\r\n--b--\r\n"
	token := map[string]string{"X-Atlassian-Token": "no-check"}
	for _, tc := range []struct {
		name   string
		req    request
		status int
	}{
		{"no XSRF token", request{path: "/rest/api/3/issue/OPS-1/attachments", contentType: ct, body: twoFiles}, http.StatusForbidden},
		{"unknown issue", request{path: "/rest/api/3/issue/OPS-9/attachments", contentType: ct, body: twoFiles, header: token}, http.StatusNotFound},
		{"no file part", request{path: "/rest/api/3/issue/OPS-1/attachments", contentType: ct, header: token,
			body: "--b\r\nContent-Disposition: form-data; name=\"comment\"\r\n\r\nx\r\n--b--\r\n"}, http.StatusBadRequest},
		{"not multipart", request{path: "/rest/api/3/issue/OPS-1/attachments", contentType: "application/json", body: `{}`, header: token}, http.StatusUnsupportedMediaType},
	} {
		if resp, body := send(t, c, srv.URL, tc.req); resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.status)
		}
	}
	if st := s.snapshot(); st.ByEndpoint[jiraAddAttachment] != 0 {
		t.Fatalf("effects %v after refusals", st.ByEndpoint)
	}
	resp, body := send(t, c, srv.URL, request{path: "/rest/api/3/issue/OPS-1/attachments", contentType: ct, body: twoFiles, header: token})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"filename":"a.pdf","id":"10001","mimeType":"application/pdf"`) ||
		!strings.Contains(string(body), `"filename":"b.txt","id":"10002"`) {
		t.Fatalf("two files: %d %s", resp.StatusCode, body)
	}
	if st := s.snapshot(); st.ByEndpoint[jiraAddAttachment] != 1 {
		t.Errorf("effects %v, want one jira.add_attachment for one request", st.ByEndpoint)
	}
}
