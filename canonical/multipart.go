package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
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
// body of too many is refused having built nothing. As Go's mime/multipart reads it (RFC 2046
// §5.1.1): a delimiter line is the boundary after "--" at the start of a line, then optional
// white space and the line end; the first one says whether lines end in CRLF or LF, and only that
// line end starts a delimiter in what follows (a part's content may hold the other, or the
// boundary followed by more on its line); the close delimiter adds "--". Errors wrap
// ErrInvalidBody (no boundary, a part not closed by one, bad part headers, a part without
// Content-Disposition: form-data and a name, a name, filename or Content-Type that is not valid)
// or ErrBodyTooComplex.
func parseMultipart(body []byte, ct string, budget int) (node, error) {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return node{}, fmt.Errorf("%w: a multipart body needs Content-Type multipart/form-data with a boundary (got %q)", ErrInvalidBody, ct)
	}
	delim := []byte("--" + params["boundary"])
	if parts := bytes.Count(body, delim) - 1; parts*multipartPartValues > budget {
		return node{}, fmt.Errorf("%w: %d multipart parts, more than %d", ErrBodyTooComplex, parts, budget/multipartPartValues)
	}
	// The first delimiter line: at the start, or after a line end (the preamble never counts).
	lfDelim := append([]byte("\n"), delim...)
	pos, final, nl := -1, false, ""
	for i := 0; pos < 0; i++ {
		if i > 0 || !bytes.HasPrefix(body, delim) {
			j := bytes.Index(body[i:], lfDelim)
			if j < 0 {
				return node{}, fmt.Errorf("%w: multipart: no boundary line", ErrInvalidBody)
			}
			i += j + 1
		}
		pos, final, nl = delimiterLine(body, i+len(delim), "")
	}
	obj := node{kind: kindObject}
	index := map[string]int{} // part name -> its member in obj
	for !final {
		h, end, err := partHeaders(body, pos)
		if err != nil {
			return node{}, err
		}
		var k int
		for from := end; ; from = k + 1 { // the next delimiter line; a boundary with more after it is content
			i := bytes.Index(body[from:], append([]byte(nl), delim...))
			if i < 0 {
				return node{}, fmt.Errorf("%w: multipart: a part not closed by a boundary line", ErrInvalidBody)
			}
			k = from + i
			if pos, final, _ = delimiterLine(body, k+len(nl)+len(delim), nl); pos >= 0 {
				break
			}
		}
		name, part, err := multipartPart(h, body[end:k])
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
	sortMembers(obj.kids, nil)
	return obj, nil
}

// delimiterLine reads the rest of a delimiter line from pos, just after the boundary: "--" for the
// close delimiter (final), then optional spaces and tabs, then the line end nl ("": CRLF or LF,
// which it returns as nl), or the body's end after a close delimiter. next is where the line
// ends, or -1 when this is no delimiter line (more follows the boundary on its line).
func delimiterLine(body []byte, pos int, nl string) (next int, final bool, lineEnd string) {
	if final = bytes.HasPrefix(body[pos:], []byte("--")); final {
		pos += 2
	}
	for pos < len(body) && (body[pos] == ' ' || body[pos] == '\t') {
		pos++
	}
	for _, end := range []string{"\r\n", "\n"} {
		if (nl == "" || nl == end) && bytes.HasPrefix(body[pos:], []byte(end)) {
			return pos + len(end), final, end
		}
	}
	if final && pos == len(body) {
		return pos, true, nl
	}
	return -1, false, nl
}

// partFields are the part headers that count, as partHeaders read them.
type partFields struct {
	disposition, contentType, encoding string
}

// partHeaders reads the header lines of a part from pos to the empty line that ends them (each
// line ending in CRLF or LF), and returns its Content-Disposition, Content-Type and
// Content-Transfer-Encoding (names in any letter case, each at most once) and where its content
// starts. Other headers are read past. A line folded onto the next (a line that starts with a
// space or tab, obsolete since RFC 7230) is refused.
func partHeaders(body []byte, pos int) (h partFields, end int, err error) {
	size := 0
	for {
		nl := bytes.IndexByte(body[pos:], '\n')
		if nl < 0 {
			return h, 0, fmt.Errorf("%w: multipart: a part's headers do not end", ErrInvalidBody)
		}
		line := bytes.TrimSuffix(body[pos:pos+nl], []byte("\r"))
		pos += nl + 1
		if len(line) == 0 {
			return h, pos, nil
		}
		if size += len(line); size > MaxMultipartHeaderBytes {
			return h, 0, fmt.Errorf("%w: a multipart part's headers hold more than %d bytes", ErrInvalidBody, MaxMultipartHeaderBytes)
		}
		if line[0] == ' ' || line[0] == '\t' {
			return h, 0, fmt.Errorf("%w: multipart: a part's header line folded onto the next (obsolete line folding)", ErrInvalidBody)
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return h, 0, fmt.Errorf("%w: multipart: a part's header line is not \"Name: value\"", ErrInvalidBody)
		}
		var dst *string
		switch strings.ToLower(string(bytes.TrimSpace(name))) {
		case "content-disposition":
			dst = &h.disposition
		case "content-type":
			dst = &h.contentType
		case "content-transfer-encoding":
			dst = &h.encoding
		default:
			continue
		}
		if *dst != "" {
			return h, 0, fmt.Errorf("%w: multipart: a part sends %s twice", ErrInvalidBody, bytes.TrimSpace(name))
		}
		if *dst = string(bytes.TrimSpace(value)); *dst == "" {
			return h, 0, fmt.Errorf("%w: multipart: a part sends an empty %s", ErrInvalidBody, bytes.TrimSpace(name))
		}
	}
}

// multipartPart is the name and the object of a part with headers h and content (parseMultipart).
// Quoted-printable content is decoded first, as Go's mime/multipart decodes it for the upstream;
// an identity Content-Transfer-Encoding (7bit, 8bit, binary) never counts, and any other is a
// member of the part ("content_transfer_encoding"), so that bytes an upstream may read otherwise
// never fingerprint alike.
func multipartPart(h partFields, content []byte) (string, node, error) {
	kind, dparams, err := mime.ParseMediaType(h.disposition)
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
	if h.contentType != "" {
		mt, params, err := mime.ParseMediaType(h.contentType)
		if err != nil {
			return "", node{}, fmt.Errorf("%w: multipart part %q: Content-Type %q: %v", ErrInvalidBody, name, h.contentType, err)
		}
		contentType = mime.FormatMediaType(mt, params)
	}
	kids := make([]member, 1, 4)
	kids[0] = member{name: "content_type", val: node{kind: kindString, str: contentType}}
	switch encoding := strings.ToLower(h.encoding); encoding {
	case "", "7bit", "8bit", "binary":
	case "quoted-printable":
		// The reader is lenient, as Go's is for an upstream: a malformed escape passes through.
		if content, err = io.ReadAll(quotedprintable.NewReader(bytes.NewReader(content))); err != nil {
			return "", node{}, fmt.Errorf("%w: multipart part %q: quoted-printable: %v", ErrInvalidBody, name, err)
		}
	default:
		kids = append(kids, member{name: "content_transfer_encoding", val: node{kind: kindString, str: encoding}})
	}
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
	sortMembers(kids, nil)
	return name, node{kind: kindObject, kids: kids}, nil
}
