package main

// A plain JSON-RPC 2.0 API over HTTP (not MCP), as many internal and blockchain APIs are: one
// endpoint, the method in the body, and every answer a 200, the errors included.
//
//	POST /jsonrpc {"jsonrpc":"2.0","id":1,"method":"tickets.create","params":{"title":"..."}}
//	-> 200 {"jsonrpc":"2.0","id":1,"result":{"id":"T-1843","title":"...","url":"..."}}
//
// A request that is not JSON-RPC gets -32600, another method -32601, a title missing or empty
// -32602: each at 200, with no side effect (docs/cases.md C24).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// jsonrpcCreate plays POST /jsonrpc.
func (s *sandbox) jsonrpcCreate(c *call) reply {
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  struct {
			Title string `json:"title"`
		} `json:"params"`
	}
	fail := func(code int, message string) reply {
		id := req.ID
		if id == nil {
			id = json.RawMessage("null")
		}
		return reply{status: http.StatusOK, rejected: true, body: map[string]any{"jsonrpc": "2.0", "id": id,
			"error": map[string]any{"code": code, "message": message}}}
	}
	if err := json.Unmarshal(c.body, &req); err != nil || req.JSONRPC != "2.0" || req.ID == nil {
		return fail(-32600, "Invalid Request: want one JSON-RPC 2.0 request with an id")
	}
	if req.Method != "tickets.create" {
		return fail(-32601, fmt.Sprintf("Method not found: %q (the sandbox plays tickets.create)", req.Method))
	}
	if strings.TrimSpace(req.Params.Title) == "" {
		return fail(-32602, "Invalid params: title must be provided")
	}
	var ticket map[string]string
	s.commit(jsonrpcCreateTicket, func() {
		s.tickets.last++
		id := fmt.Sprintf("T-%d", s.tickets.last)
		ticket = map[string]string{"id": id, "title": req.Params.Title, "url": c.base + "/v1/tickets/" + id}
	})
	return reply{status: http.StatusOK, effect: true, id: ticket["id"],
		body: map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": ticket}}
}
