package main

// Zendesk Support API, "Create Ticket":
// https://developer.zendesk.com/api-reference/ticketing/tickets/tickets/#create-ticket

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// zendeskState numbers tickets and the requesters it meets. Sequences survive a reset.
type zendeskState struct {
	lastTicket int64            // the first ticket gets id 35436
	lastUser   int64            // requesters get ids from 20978393 on
	users      map[string]int64 // requester id by e-mail address
}

func newZendeskState() zendeskState {
	return zendeskState{lastTicket: 35435, lastUser: 20978392, users: make(map[string]int64)}
}

// forget forgets the requesters met.
func (st *zendeskState) forget() { clear(st.users) }

// zendeskAPIUser is the id of the agent the API client authenticates as: the submitter of every
// ticket, and its requester when the request names none.
const zendeskAPIUser = 1900000001

// zendeskTicketInput is the part of {"ticket":{...}} the sandbox reads; other members are ignored.
type zendeskTicketInput struct {
	Subject string `json:"subject"`
	Comment *struct {
		Body     string `json:"body"`
		HTMLBody string `json:"html_body"`
	} `json:"comment"`
	Priority   string   `json:"priority"`
	Type       string   `json:"type"`
	Tags       []string `json:"tags"`
	ExternalID string   `json:"external_id"`
	Requester  *struct {
		Name  string `json:"name"`
		Email string `json:"email"`
	} `json:"requester"`
	RequesterID int64 `json:"requester_id"`
}

// zendeskTicket is the ticket in the response.
type zendeskTicket struct {
	ID          int64    `json:"id"`
	URL         string   `json:"url"`
	ExternalID  *string  `json:"external_id"`
	Type        *string  `json:"type"`
	Subject     string   `json:"subject"`
	RawSubject  string   `json:"raw_subject"`
	Description string   `json:"description"`
	Priority    *string  `json:"priority"`
	Status      string   `json:"status"`
	RequesterID int64    `json:"requester_id"`
	SubmitterID int64    `json:"submitter_id"`
	Tags        []string `json:"tags"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
}

// zendeskError is Zendesk's validation error body.
func zendeskError(status int, errName, description string) reply {
	return reply{status: status, body: map[string]any{
		"error":       errName,
		"description": "Record validation errors",
		"details": map[string]any{
			"base": []map[string]string{{"description": description, "error": errName}},
		},
	}}
}

// zendeskCreateTicket plays POST /api/v2/tickets.json with
// {"ticket":{"subject":"...","comment":{"body":"..."},"priority":"urgent","requester":{"name":"...","email":"..."}}}:
// 201 {"ticket":{"id":35436,"url":"http://HOST/api/v2/tickets/35436.json","status":"new",...}}
// with a Location header. Malformed JSON gets 400; a missing comment or an unknown priority 422;
// neither has an effect.
func (s *sandbox) zendeskCreateTicket(c *call) reply {
	var req struct {
		Ticket *zendeskTicketInput `json:"ticket"`
	}
	if err := json.Unmarshal(c.body, &req); err != nil {
		return reply{status: http.StatusBadRequest, body: map[string]string{"error": "InvalidJSON", "description": err.Error()}}
	}
	in := req.Ticket
	if in == nil {
		return zendeskError(http.StatusUnprocessableEntity, "InvalidValue", "Ticket: is required")
	}
	if in.Comment == nil || strings.TrimSpace(in.Comment.Body+in.Comment.HTMLBody) == "" {
		return zendeskError(http.StatusUnprocessableEntity, "BlankValue", "Description: cannot be blank")
	}
	if in.Priority != "" && !slices.Contains([]string{"urgent", "high", "normal", "low"}, in.Priority) {
		return zendeskError(http.StatusUnprocessableEntity, "InvalidValue", "Priority: is not valid")
	}

	description := in.Comment.Body
	if description == "" {
		description = in.Comment.HTMLBody
	}
	now := time.Now().UTC().Format(time.RFC3339)
	t := zendeskTicket{
		ExternalID:  optional(in.ExternalID),
		Type:        optional(in.Type),
		Subject:     in.Subject,
		RawSubject:  in.Subject,
		Description: description,
		Priority:    optional(in.Priority),
		Status:      "new",
		RequesterID: in.RequesterID,
		SubmitterID: zendeskAPIUser,
		Tags:        in.Tags,
		CreatedAt:   now,
		UpdatedAt:   now,
	}
	if t.Tags == nil {
		t.Tags = []string{}
	}
	s.commit(zendeskCreateTicket, func() {
		s.zendesk.lastTicket++
		t.ID = s.zendesk.lastTicket
		t.URL = c.base + "/api/v2/tickets/" + strconv.FormatInt(t.ID, 10) + ".json"
		switch {
		case t.RequesterID != 0:
		case in.Requester != nil && in.Requester.Email != "":
			email := strings.ToLower(in.Requester.Email)
			if s.zendesk.users[email] == 0 {
				s.zendesk.lastUser++
				s.zendesk.users[email] = s.zendesk.lastUser
			}
			t.RequesterID = s.zendesk.users[email]
		default:
			t.RequesterID = zendeskAPIUser
		}
	})
	return reply{
		status: http.StatusCreated,
		header: http.Header{"Location": {t.URL}},
		body:   map[string]any{"ticket": t},
		effect: true,
		id:     strconv.FormatInt(t.ID, 10),
	}
}

// optional is nil for "", as Zendesk answers null for unset fields.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
