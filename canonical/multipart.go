package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"slices"
	"strings"
	"unicode/utf8"
)

// A multipart/form-data body (RFC 7578) read as a document (format multipart, or chosen by its
// Content-Type): an object mapping each part's name to the array of its parts in order, each part
// an object of
//
//	"content_type"  its media type, lower case, parameters sorted ("text/plain" when the part
//	                names none, as RFC 7578 §4.4 says);
//	"filename"      the filename of its Content-Disposition, when it has one;
//	"value"         its bytes as a string, when it has no filename and they are UTF-8 (a field);
//	"sha256"        else "sha256:<hex>" of its bytes (a file, or a field that is not text).
//
// So `/title/0/value` is a field's text and `/file/0/sha256` a file's digest. The boundary, the
// order and the letter case of a part's headers, and headers other than Content-Disposition and
// Content-Type never count: a client that sends the same upload again with a new boundary and
// its headers written otherwise sends the same effect (docs/cases.md C21). A file's bytes count by
// their digest, so the document holds no file, whatever its size.

// Bounds of a multipart body, besides the request's: a part costs multipartPartValues values of
// the value budget (what parsing it allocates, about 900 bytes, as 16 values of the memory bound:
// TestMemoryBound), and its headers at most MaxMultipartHeaderBytes.
const (
	multipartPartValues = 16
	// MaxMultipartHeaderBytes bounds the headers of one part (names and values).
	MaxMultipartHeaderBytes = 16 << 10
)

// parseMultipart reads body as multipart/form-data with the boundary of the Content-Type ct,
// within budget values: the parts are counted by their boundary lines before any is read, so a
// body of too many is refused having built nothing. A line may end in CRLF or LF. Errors wrap
// ErrInvalidBody (no boundary, a part not closed by one, headers that are not "Name: value" lines
// or over MaxMultipartHeaderBytes, a part without Content-Disposition: form-data and a name, a
// name, filename or Content-Type that is not valid) or ErrBodyTooComplex.
func parseMultipart(body []byte, ct string, budget int) (node, error) {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return node{}, fmt.Errorf("%w: a multipart body needs Content-Type multipart/form-data with a boundary (got %q)", ErrInvalidBody, ct)
	}
	delim := "--" + params["boundary"]
	if parts := bytes.Count(body, []byte(delim)) - 1; parts*multipartPartValues > budget {
		return node{}, fmt.Errorf("%w: %d multipart parts, more than %d", ErrBodyTooComplex, parts, budget/multipartPartValues)
	}
	next := "\n" + delim // a delimiter starts a line
	pos := 0
	if !bytes.HasPrefix(body, []byte(delim)) {
		i := bytes.Index(body, []byte(next))
		if i < 0 {
			return node{}, fmt.Errorf("%w: multipart: no boundary line", ErrInvalidBody)
		}
		pos = i + 1 // the preamble before it never counts
	}
	obj := node{kind: kindObject}
	index := map[string]int{} // part name -> its member in obj
	for {
		pos += len(delim)
		if bytes.HasPrefix(body[pos:], []byte("--")) { // the close delimiter; the epilogue never counts
			break
		}
		for pos < len(body) && (body[pos] == ' ' || body[pos] == '\t') { // transport padding
			pos++
		}
		if pos = lineEnd(body, pos); pos < 0 {
			return node{}, fmt.Errorf("%w: multipart: a boundary line with more after it", ErrInvalidBody)
		}
		disposition, contentType, end, err := partHeaders(body, pos)
		if err != nil {
			return node{}, err
		}
		k := bytes.Index(body[end:], []byte(next))
		if k < 0 {
			return node{}, fmt.Errorf("%w: multipart: a part not closed by a boundary line", ErrInvalidBody)
		}
		content := bytes.TrimSuffix(body[end:end+k], []byte("\r"))
		pos = end + k + 1
		name, part, err := multipartPart(disposition, contentType, content)
		if err != nil {
			return node{}, err
		}
		i, ok := index[name]
		if !ok {
			i = len(obj.kids)
			index[name] = i
			obj.kids = append(obj.kids, member{name: name, val: node{kind: kindArray}})
		}
		obj.kids[i].val.kids = append(obj.kids[i].val.kids, member{val: part})
	}
	slices.SortFunc(obj.kids, func(a, b member) int { return compareUTF16(a.name, b.name) })
	return obj, nil
}

// lineEnd returns the position after the line end (CRLF or LF) at pos, or -1 when there is none.
func lineEnd(body []byte, pos int) int {
	switch {
	case bytes.HasPrefix(body[pos:], []byte("\r\n")):
		return pos + 2
	case bytes.HasPrefix(body[pos:], []byte("\n")):
		return pos + 1
	}
	return -1
}

// partHeaders reads the header lines of a part from pos to the empty line that ends them, and
// returns its Content-Disposition and Content-Type (names in any letter case; a line that starts
// with a space or tab continues the one before) and where its content starts. Other headers are
// read past.
func partHeaders(body []byte, pos int) (disposition, contentType string, end int, err error) {
	var current *string // the header a continuation line adds to
	size := 0
	for {
		nl := bytes.IndexByte(body[pos:], '\n')
		if nl < 0 {
			return "", "", 0, fmt.Errorf("%w: multipart: a part's headers do not end", ErrInvalidBody)
		}
		line := bytes.TrimSuffix(body[pos:pos+nl], []byte("\r"))
		pos += nl + 1
		if len(line) == 0 {
			return disposition, contentType, pos, nil
		}
		if size += len(line); size > MaxMultipartHeaderBytes {
			return "", "", 0, fmt.Errorf("%w: a multipart part's headers hold more than %d bytes", ErrInvalidBody, MaxMultipartHeaderBytes)
		}
		if line[0] == ' ' || line[0] == '\t' {
			if current != nil {
				*current += " " + string(bytes.TrimSpace(line))
			}
			continue
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return "", "", 0, fmt.Errorf("%w: multipart: a part's header line is not \"Name: value\"", ErrInvalidBody)
		}
		current = nil
		switch {
		case bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Disposition")):
			disposition, current = string(bytes.TrimSpace(value)), &disposition
		case bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Type")):
			contentType, current = string(bytes.TrimSpace(value)), &contentType
		}
	}
}

// multipartPart is the name and the object of a part with those headers and content
// (parseMultipart).
func multipartPart(disposition, ct string, content []byte) (string, node, error) {
	kind, dparams, err := mime.ParseMediaType(disposition)
	name := dparams["name"]
	switch {
	case err != nil || !strings.EqualFold(kind, "form-data"):
		return "", node{}, fmt.Errorf("%w: a multipart part without Content-Disposition: form-data", ErrInvalidBody)
	case name == "":
		return "", node{}, fmt.Errorf("%w: a multipart part without a name", ErrInvalidBody)
	case !utf8.ValidString(name):
		return "", node{}, fmt.Errorf("%w: a multipart part's name is not valid UTF-8", ErrInvalidBody)
	}
	contentType := "text/plain"
	if ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil {
			return "", node{}, fmt.Errorf("%w: multipart part %q: Content-Type %q: %v", ErrInvalidBody, name, ct, err)
		}
		contentType = mime.FormatMediaType(mt, params)
	}
	kids := make([]member, 1, 3)
	kids[0] = member{name: "content_type", val: node{kind: kindString, str: contentType}}
	filename, hasFile := dparams["filename"]
	if hasFile {
		if !utf8.ValidString(filename) {
			return "", node{}, fmt.Errorf("%w: multipart part %q: its filename is not valid UTF-8", ErrInvalidBody, name)
		}
		kids = append(kids, member{name: "filename", val: node{kind: kindString, str: filename}})
	}
	if !hasFile && utf8.Valid(content) {
		kids = append(kids, member{name: "value", val: node{kind: kindString, str: string(content)}})
	} else {
		sum := sha256.Sum256(content)
		kids = append(kids, member{name: "sha256", val: node{kind: kindString, str: "sha256:" + hex.EncodeToString(sum[:])}})
	}
	slices.SortFunc(kids, func(a, b member) int { return compareUTF16(a.name, b.name) })
	return name, node{kind: kindObject, kids: kids}, nil
}
