package mcpwire

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// Final is what the gateway reads of the final response of a guarded call (docs/contract.md §7
// Outcome).
type Final struct {
	ID         []byte // the id exactly as sent
	IsError    bool   // result.isError == true
	ResultType string // result.resultType ("" when absent; "input_required" never stored)
	// Task: result is a task handle, in either revision's shape: 2025-11-25's result.task object,
	// or 2026-07-28's resultType "task" (the tasks extension). TaskID is its task id, raw (a JSON
	// string; nil when it names none): result.task.taskId, or result.taskId.
	Task     bool
	TaskID   []byte
	ErrCode  int // error.code when the message is an error (0 otherwise)
	HasError bool
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
	name, val := `{"result":`, m.result
	if val == nil {
		name, val = `{"error":`, m.err
		f.HasError = true
		if f.ErrCode, err = strconv.Atoi(string(lookup(val, "code"))); err != nil {
			return nil, invalid(`invalid response: "error" has no integer "code"`)
		}
	} else {
		f.result(val)
	}
	f.Member = make([]byte, 0, len(name)+len(val)+1)
	f.Member = append(append(append(f.Member, name...), val...), '}')
	return f, nil
}

// result reads the members of a result that decide its outcome, in one pass (the first of a name
// sent twice counts).
func (f *Final) result(val []byte) {
	if val[0] != '{' {
		return
	}
	var isError, resultType, task bool
	it := newIter(val)
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		switch string(text(k)) {
		case "isError":
			if !isError {
				isError, f.IsError = true, string(v) == "true"
			}
		case "resultType":
			if !resultType && isString(v) {
				resultType, f.ResultType = true, string(text(v))
			}
		case "task":
			if !task {
				task = true
				if v[0] == '{' {
					f.Task, f.TaskID = true, lookup(v, "taskId")
				}
			}
		}
	}
	if f.ResultType == ResultTypeTask {
		f.Task, f.TaskID = true, lookup(val, "taskId")
	}
}

// resultHead starts a result member as ReadFinal writes it; metaName is "_meta" as a JSON string;
// unicodeEscape starts a \u escape, with which a name may spell "_meta" otherwise.
var (
	resultHead    = `{"result":`
	metaName      = []byte(`"_meta"`)
	unicodeEscape = []byte(`\u`)
)

// ResultTypeTask is the resultType of a 2026-07-28 task handle (the tasks extension).
const ResultTypeTask = "task"

// validID reports whether id is a JSON string or number, alone.
func validID(id []byte) bool {
	return (isString(id) || isNumber(id)) && isJSON(id) && valueEnd(id, 0) == len(id)
}

// WithResultMeta returns the pieces whose concatenation is member, a final response's member
// (`{"result":…}`, Final.Member), with value, raw JSON, as result._meta[name]: added to the
// result's _meta, or to a _meta made for it; every other byte as it was. Pieces 0 and 2 are
// member's own bytes, not a copy (a replay writes them one after the other, as EnvelopeParts'),
// but where the _meta already holds a member called name, which is replaced in a copy. A _meta
// that is null is replaced. An error member, a result that is not an object and a _meta that is
// neither an object nor null come back as they are, in piece 0.
func WithResultMeta(member []byte, name string, value []byte) [3][]byte {
	qname, _ := json.Marshal(name) // a string always encodes
	entry := slices.Concat(qname, []byte{':'}, value)
	res, at, meta := member[len(resultHead):], len(resultHead), []byte(nil)
	if !bytes.HasPrefix(member, []byte(resultHead)) || len(res) == 0 || res[0] != '{' ||
		bytes.Contains(member, metaName) || bytes.Contains(member, unicodeEscape) {
		// Not as ReadFinal writes a result member, or "_meta" somewhere in it, perhaps spelled
		// with \u escapes: walk it (the common replay, a result with neither, is spared the walk).
		var ok bool
		res = lookup(member, "result")
		if at, ok = offsetIn(member, res); !ok || res[0] != '{' {
			return [3][]byte{member}
		}
		meta = lookup(res, "_meta")
	}
	if meta == nil {
		insert := slices.Concat([]byte(`"_meta":{`), entry, []byte{'}'})
		if trimSpace(res[1:])[0] != '}' { // a result with members
			insert = append(insert, ',')
		}
		return [3][]byte{member[:at+1], insert, member[at+1:]}
	}
	mat, ok := offsetIn(member, meta)
	switch {
	case ok && string(meta) == "null": // no _meta: the gateway's takes its place
		return [3][]byte{member[:mat], slices.Concat([]byte{'{'}, entry, []byte{'}'}), member[mat+len(meta):]}
	case !ok || meta[0] != '{':
		return [3][]byte{member}
	}
	kept, cut := cutMembers(meta, name)
	if len(kept) > 2 {
		entry = append(entry, ',')
	}
	if len(cut) > 0 {
		return [3][]byte{slices.Concat(member[:mat], []byte{'{'}, entry, kept[1:], member[mat+len(meta):])}
	}
	return [3][]byte{member[:mat+1], entry, member[mat+1:]}
}
