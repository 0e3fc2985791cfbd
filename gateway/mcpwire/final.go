package mcpwire

import (
	"encoding/json"
	"strconv"
)

// Final is what the gateway reads of the final response of a guarded call (docs/contract.md §7
// Outcome).
type Final struct {
	ID         []byte // the id exactly as sent
	IsError    bool   // result.isError == true
	ResultType string // result.resultType ("" when absent; "input_required" never stored)
	Task       bool   // result is a task handle (result.task object present)
	ErrCode    int    // error.code when the message is an error (0 otherwise)
	HasError   bool
	// Member is the message's "result" or "error" member as a one-member object
	// `{"result":…}` / `{"error":…}`, the value exactly the bytes sent: what a receipt stores.
	Member []byte
}

// ReadFinal reads msg as a JSON-RPC response. Errors are *Error: ParseError when msg is not JSON,
// InvalidRequest when it is not a response (a request, "jsonrpc" not "2.0", no id, a member sent
// twice, both or neither of result and error, an error without an integer code).
func ReadFinal(msg []byte) (*Final, error) {
	m, err := Parse(msg)
	switch {
	case err != nil:
		return nil, err
	case m.Kind != Response:
		return nil, invalid("invalid response: not a JSON-RPC response")
	}
	f := &Final{ID: m.ID}
	name, val := `{"result":`, lookup(msg[ws(msg, 0):], "result")
	if val == nil {
		name, val = `{"error":`, lookup(msg[ws(msg, 0):], "error")
		f.HasError = true
		code := lookup(val, "code")
		if f.ErrCode, err = strconv.Atoi(string(code)); err != nil {
			return nil, invalid(`invalid response: "error" has no integer "code"`)
		}
	} else {
		f.IsError = string(lookup(val, "isError")) == "true"
		if rt := lookup(val, "resultType"); isString(rt) {
			f.ResultType = string(text(rt))
		}
		task := lookup(val, "task")
		f.Task = len(task) > 0 && task[0] == '{'
	}
	f.Member = make([]byte, 0, len(name)+len(val)+1)
	f.Member = append(append(append(f.Member, name...), val...), '}')
	return f, nil
}

// validID reports whether id is a JSON string or number, alone.
func validID(id []byte) bool {
	return (isString(id) || isNumber(id)) && json.Valid(id) && valueEnd(id, 0) == len(id)
}
