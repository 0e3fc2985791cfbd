package main

// Jira Cloud platform REST API v3, "Create issue" and "Get issue":
// https://developer.atlassian.com/cloud/jira/platform/rest/v3/api-group-issues/

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// jiraState holds the issues created. Sequences survive a reset, so an id is never reused.
type jiraState struct {
	lastID  int64                 // the first issue gets id 10001
	lastNum map[string]int64      // last issue number by project key: OPS-1, OPS-2, ...
	issues  map[string]*jiraIssue // by id and by key
	// lastAttachment numbers the attachments (jira_attachments.go): the first gets id 10001.
	lastAttachment int64
}

func newJiraState() jiraState {
	return jiraState{lastID: 10000, lastNum: make(map[string]int64), issues: make(map[string]*jiraIssue), lastAttachment: 10000}
}

// forget forgets the issues created.
func (st *jiraState) forget() { clear(st.issues) }

// jiraIssue is a created issue; it is never changed after creation.
type jiraIssue struct {
	id, key, self string
	fields        map[string]any // as sent
	created       time.Time
}

// jiraErrors is Jira's error body:
// {"errorMessages":["..."],"errors":{"summary":"You must specify a summary of the issue."}}.
type jiraErrors struct {
	ErrorMessages []string          `json:"errorMessages"`
	Errors        map[string]string `json:"errors"`
}

func jiraError(status int, messages []string, fields map[string]string) reply {
	if messages == nil {
		messages = []string{}
	}
	if fields == nil {
		fields = map[string]string{}
	}
	return reply{status: status, body: jiraErrors{ErrorMessages: messages, Errors: fields}}
}

var jiraProjectKey = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,9}$`)

// jiraCreateIssue plays POST /rest/api/3/issue with
// {"fields":{"project":{"key":"OPS"},"summary":"...","issuetype":{"name":"Task"},...}}: 201
// {"id":"10001","key":"OPS-1","self":"http://HOST/rest/api/3/issue/10001"}. A missing or invalid
// project key, summary or issue type gets 400 and no effect.
func (s *sandbox) jiraCreateIssue(c *call) reply {
	var req struct {
		Fields map[string]any `json:"fields"`
	}
	if err := decodeJSON(c.body, &req); err != nil {
		return jiraError(http.StatusBadRequest, []string{"Invalid request payload: " + err.Error()}, nil)
	}
	problems := map[string]string{}
	project := stringAt(req.Fields, "project", "key")
	if !jiraProjectKey.MatchString(project) {
		problems["project"] = "Specify a valid project ID or key"
	}
	if strings.TrimSpace(stringAt(req.Fields, "summary")) == "" {
		problems["summary"] = "You must specify a summary of the issue."
	}
	if stringAt(req.Fields, "issuetype", "name") == "" {
		problems["issuetype"] = "Specify an issue type"
	}
	if len(problems) > 0 {
		return jiraError(http.StatusBadRequest, nil, problems)
	}

	iss := &jiraIssue{fields: req.Fields, created: time.Now()}
	s.commit(jiraCreateIssue, func() {
		s.jira.lastID++
		s.jira.lastNum[project]++
		iss.id = strconv.FormatInt(s.jira.lastID, 10)
		iss.key = fmt.Sprintf("%s-%d", project, s.jira.lastNum[project])
		iss.self = c.base + "/rest/api/3/issue/" + iss.id
		s.jira.issues[iss.id] = iss
		s.jira.issues[iss.key] = iss
	})
	return reply{
		status: http.StatusCreated,
		body:   map[string]string{"id": iss.id, "key": iss.key, "self": iss.self},
		effect: true,
		id:     iss.key,
	}
}

// jiraGetIssue plays GET /rest/api/3/issue/{issueIdOrKey}: 200 {"id","key","self","fields"} with
// the fields as created plus "created" and "status", or 404.
func (s *sandbox) jiraGetIssue(c *call) reply {
	idOrKey := c.r.PathValue("id")
	s.mu.Lock()
	iss := s.jira.issues[strings.ToUpper(idOrKey)]
	s.mu.Unlock()
	if iss == nil {
		return jiraError(http.StatusNotFound, []string{"Issue does not exist or you do not have permission to see it."}, nil)
	}
	fields := maps.Clone(iss.fields)
	fields["created"] = iss.created.UTC().Format("2006-01-02T15:04:05.000-0700")
	fields["status"] = map[string]string{"name": "To Do"}
	return reply{
		status: http.StatusOK,
		body:   map[string]any{"id": iss.id, "key": iss.key, "self": iss.self, "fields": fields},
		id:     iss.key,
	}
}

// stringAt returns the string at the path of object members in v, or "".
func stringAt(v any, path ...string) string {
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[name]
	}
	s, _ := v.(string)
	return s
}
