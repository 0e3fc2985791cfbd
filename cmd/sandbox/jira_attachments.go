package main

// Jira Cloud REST API v3, add attachment:
//
//	POST /rest/api/3/issue/{issueIdOrKey}/attachments
//	X-Atlassian-Token: no-check
//	Content-Type: multipart/form-data; boundary=...   (one or more parts named "file")
//	-> 200 [{"id":"10001","filename":"report.pdf","size":14,"mimeType":"application/pdf","self":...}]
//
// One request is one side effect, whatever the number of files. Without the X-Atlassian-Token
// header Jira answers 403 (its XSRF check); an unknown issue 404; a body without a file part 400:
// none of them acts. Files are counted, not kept.

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
)

// jiraAddAttachment plays POST /rest/api/3/issue/{id}/attachments.
func (s *sandbox) jiraAddAttachment(c *call) reply {
	if c.r.Header.Get("X-Atlassian-Token") != "no-check" {
		return jiraError(http.StatusForbidden, []string{"XSRF check failed"}, nil)
	}
	s.mu.Lock()
	iss := s.jira.issues[strings.ToUpper(c.r.PathValue("id"))]
	s.mu.Unlock()
	if iss == nil {
		return jiraError(http.StatusNotFound, []string{"Issue does not exist or you do not have permission to see it."}, nil)
	}
	mt, params, err := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return jiraError(http.StatusUnsupportedMediaType, []string{"the attachments must be sent as multipart/form-data"}, nil)
	}
	type file struct {
		name, mimeType string
		size           int64
	}
	var files []file
	mr := multipart.NewReader(bytes.NewReader(c.body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return jiraError(http.StatusBadRequest, []string{"malformed multipart body: " + err.Error()}, nil)
		}
		n, err := io.Copy(io.Discard, p)
		if err != nil {
			return jiraError(http.StatusBadRequest, []string{"malformed multipart body: " + err.Error()}, nil)
		}
		if p.FormName() == "file" && p.FileName() != "" {
			files = append(files, file{p.FileName(), p.Header.Get("Content-Type"), n})
		}
	}
	if len(files) == 0 {
		return jiraError(http.StatusBadRequest, []string{"no file part named \"file\""}, nil)
	}
	attachments := make([]map[string]any, len(files))
	s.commit(jiraAddAttachment, func() {
		for i, f := range files {
			s.jira.lastAttachment++
			id := strconv.FormatInt(s.jira.lastAttachment, 10)
			attachments[i] = map[string]any{"id": id, "filename": f.name, "size": f.size, "mimeType": f.mimeType,
				"self": c.base + "/rest/api/3/attachment/" + id}
		}
	})
	return reply{status: http.StatusOK, body: attachments, effect: true, id: attachments[0]["id"].(string)}
}
