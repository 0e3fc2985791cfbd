package main

// Linear GraphQL API, mutation issueCreate:
// https://developers.linear.app/docs/graphql/working-with-the-graphql-api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// linearState numbers issues by team key. It survives a reset, so an identifier is never reused.
type linearState struct {
	lastNum map[string]int64 // last issue number by team key: ENG-1, ENG-2, ...
}

func newLinearState() linearState { return linearState{lastNum: make(map[string]int64)} }

// linearIssueCreateRe matches an issueCreate mutation whose input is a variable, and captures the
// variable's name: mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) {...} }.
var (
	linearMutationRe    = regexp.MustCompile(`^\s*mutation\b`)
	linearIssueCreateRe = regexp.MustCompile(`\bissueCreate\s*\(\s*input\s*:\s*\$(\w+)\s*\)`)
	linearTeamKeyRe     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{0,6}$`)
)

// graphQLError is one member of a GraphQL response's "errors".
type graphQLError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

// linearErrors answers status with {"errors":[...]}; withData adds "data":{"issueCreate":null},
// as GraphQL does for an error raised while executing the mutation's field rather than validating
// the document.
func linearErrors(status int, withData bool, code, message string) reply {
	body := map[string]any{"errors": []graphQLError{{
		Message:    message,
		Extensions: map[string]any{"code": code, "userError": true, "userPresentableMessage": message},
	}}}
	if withData {
		body["data"] = map[string]any{"issueCreate": nil}
	}
	return reply{status: status, body: body, rejected: true}
}

// linearGraphQL plays POST /graphql. Only the issueCreate mutation, with its input passed as a
// variable, is played:
//
//	{"query":"mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id identifier url } } }",
//	 "variables":{"input":{"teamId":"...","title":"..."}}}
//
// gets 200 {"data":{"issueCreate":{"success":true,"issue":{"id":UUID,"identifier":"ENG-1","url":...}}}}.
// The identifier's prefix is the teamId when that looks like a team key ("OPS"), else "ENG".
// Any other document gets 200 with a GraphQL "errors" array, a body that is not JSON 400; neither
// has an effect.
func (s *sandbox) linearGraphQL(c *call) reply {
	var req struct {
		Query         string                     `json:"query"`
		OperationName string                     `json:"operationName"`
		Variables     map[string]json.RawMessage `json:"variables"`
	}
	if err := json.Unmarshal(c.body, &req); err != nil {
		return linearErrors(http.StatusBadRequest, false, "BAD_USER_INPUT", "POST body is not a GraphQL request: "+err.Error())
	}
	m := linearIssueCreateRe.FindStringSubmatch(req.Query)
	if m == nil || !linearMutationRe.MatchString(req.Query) {
		return linearErrors(http.StatusOK, false, "GRAPHQL_VALIDATION_FAILED",
			"the sandbox plays only `mutation { issueCreate(input: $input) { ... } }` with the input passed as a variable")
	}
	var input struct {
		TeamID      string `json:"teamId"`
		Title       string `json:"title"`
		Description string `json:"description"`
	}
	raw, ok := req.Variables[m[1]]
	if !ok {
		return linearErrors(http.StatusOK, false, "GRAPHQL_VALIDATION_FAILED", fmt.Sprintf("Variable \"$%s\" of required type \"IssueCreateInput!\" was not provided.", m[1]))
	}
	if err := json.Unmarshal(raw, &input); err != nil {
		return linearErrors(http.StatusOK, false, "GRAPHQL_VALIDATION_FAILED", fmt.Sprintf("Variable \"$%s\" got invalid value: %v", m[1], err))
	}
	if input.TeamID == "" {
		return linearErrors(http.StatusOK, true, "INVALID_INPUT", "Argument Validation Error: teamId must be provided")
	}
	if strings.TrimSpace(input.Title) == "" {
		return linearErrors(http.StatusOK, true, "INVALID_INPUT", "Argument Validation Error: title must be provided")
	}

	team := "ENG"
	if linearTeamKeyRe.MatchString(input.TeamID) {
		team = strings.ToUpper(input.TeamID)
	}
	id := newUUID()
	var identifier string
	s.commit(linearIssueCreate, func() {
		s.linear.lastNum[team]++
		identifier = fmt.Sprintf("%s-%d", team, s.linear.lastNum[team])
	})
	issue := map[string]string{
		"id":         id,
		"identifier": identifier,
		"url":        c.base + "/sandbox/issue/" + identifier,
	}
	return reply{
		status: http.StatusOK,
		body:   map[string]any{"data": map[string]any{"issueCreate": map[string]any{"success": true, "issue": issue}}},
		effect: true,
		id:     identifier,
	}
}
