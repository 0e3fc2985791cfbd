package canonical

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// upload is a multipart/form-data body of a title field and a file, as a client library writes
// it: boundary b, each part's headers as given (lines without CRLF), and the file's bytes.
func upload(b string, titleHeaders, fileHeaders []string, title, file string) (ct string, body []byte) {
	var sb strings.Builder
	part := func(headers []string, data string) {
		sb.WriteString("--" + b + "\r\n")
		for _, h := range headers {
			sb.WriteString(h + "\r\n")
		}
		sb.WriteString("\r\n" + data + "\r\n")
	}
	part(titleHeaders, title)
	part(fileHeaders, file)
	sb.WriteString("--" + b + "--\r\n")
	return "multipart/form-data; boundary=" + b, []byte(sb.String())
}

var (
	titleHeaders = []string{`Content-Disposition: form-data; name="title"`}
	fileHeaders  = []string{`Content-Disposition: form-data; name="file"; filename="report.pdf"`, `Content-Type: application/pdf`}
)

// multipartDocument is the document of a multipart body under fields.
func multipartDocument(t *testing.T, fields Fields, ct string, body []byte) []byte {
	t.Helper()
	c, err := Compile(fields)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.Document(&Request{Tool: "upload", Method: http.MethodPost, Header: http.Header{"Content-Type": {ct}}, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestMultipartSameUpload (docs/cases.md C21): the same upload sent again with a new boundary,
// its part headers in another order and letter case, and headers that never count
// (Content-Transfer-Encoding, Content-Length) is the same document, by Content-Type and under
// format: multipart; a changed field or file differs in the part that changed, named by its name.
func TestMultipartSameUpload(t *testing.T) {
	t.Parallel()
	ct, body := upload("X-BOUNDARY-1", titleHeaders, fileHeaders, "Q3 report", "%PDF-1.7 bytes")
	doc := multipartDocument(t, Fields{}, ct, body)
	if !strings.Contains(string(doc), `"title":[{"content_type":"text/plain","value":"Q3 report"}]`) ||
		!strings.Contains(string(doc), `"file":[{"content_type":"application/pdf","filename":"report.pdf","sha256":"sha256:`) {
		t.Fatalf("document %s", doc)
	}
	retryCT, retry := upload("----WebKitFormBoundary7MA4YWxkTrZu0gW",
		[]string{`content-disposition: form-data; name=title`, `Content-Length: 9`},
		[]string{`CONTENT-TYPE: Application/PDF`, `Content-Transfer-Encoding: binary`, `Content-Disposition: form-data; filename="report.pdf"; name="file"`},
		"Q3 report", "%PDF-1.7 bytes")
	for _, f := range []Fields{{}, {Format: FormatMultipart}} {
		if got := multipartDocument(t, f, retryCT, retry); string(got) != string(doc) {
			t.Errorf("format %q: the retry's document\n%s\nwant the first's\n%s", f.Format, got, doc)
		}
	}

	c, _ := Compile(Fields{})
	for _, tc := range []struct {
		title, file string
		want        []string
	}{
		{"Q4 report", "%PDF-1.7 bytes", []string{"/title"}},
		{"Q3 report", "%PDF-1.7 other bytes", []string{"/file"}},
	} {
		ct2, body2 := upload("b2", titleHeaders, fileHeaders, tc.title, tc.file)
		if got := c.DifferingFields(doc, multipartDocument(t, Fields{}, ct2, body2), 10); !slices.Equal(got, tc.want) {
			t.Errorf("title %q, file %q: differing fields %v, want %v", tc.title, tc.file, got, tc.want)
		}
	}
}

// TestMultipartRules: include and exclude name parts by name; parts of one name keep their order,
// parts of different names are sorted by name; a field that is not UTF-8 counts by its digest.
func TestMultipartRules(t *testing.T) {
	t.Parallel()
	ct, body := upload("b", titleHeaders, fileHeaders, "Q3 report", "%PDF")
	if got := multipartDocument(t, Fields{Include: []Pointer{mustPointer(t, "/title")}}, ct, body); !strings.Contains(string(got), `"body":{"/title":[{"content_type":"text/plain","value":"Q3 report"}]}`) {
		t.Errorf("include /title: %s", got)
	}
	if got := multipartDocument(t, Fields{Exclude: []Pointer{mustPointer(t, "/file")}}, ct, body); strings.Contains(string(got), "file") {
		t.Errorf("exclude /file: %s", got)
	}
	twoTags := func(first, second string) []byte {
		b := "--b\r\nContent-Disposition: form-data; name=tag\r\n\r\n" + first + "\r\n" +
			"--b\r\nContent-Disposition: form-data; name=tag\r\n\r\n" + second + "\r\n" +
			"--b\r\nContent-Disposition: form-data; name=bin\r\n\r\n\xff\xfe\r\n--b--\r\n"
		return multipartDocument(t, Fields{}, "multipart/form-data; boundary=b", []byte(b))
	}
	ab, ba := twoTags("a", "b"), twoTags("b", "a")
	if string(ab) == string(ba) {
		t.Error("two parts of one name in another order are the same document")
	}
	if !strings.Contains(string(ab), `"bin":[{"content_type":"text/plain","sha256":"sha256:`) ||
		!strings.Contains(string(ab), `"tag":[{"content_type":"text/plain","value":"a"},{"content_type":"text/plain","value":"b"}]`) {
		t.Errorf("document %s", ab)
	}
	c, _ := Compile(Fields{Sets: []Pointer{mustPointer(t, "/tag")}})
	d1, _ := c.Document(&Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"multipart/form-data; boundary=b"}},
		Body: []byte("--b\r\nContent-Disposition: form-data; name=tag\r\n\r\na\r\n--b\r\nContent-Disposition: form-data; name=tag\r\n\r\nb\r\n--b--\r\n")})
	d2, _ := c.Document(&Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"multipart/form-data; boundary=b"}},
		Body: []byte("--b\r\nContent-Disposition: form-data; name=tag\r\n\r\nb\r\n--b\r\nContent-Disposition: form-data; name=tag\r\n\r\na\r\n--b--\r\n")})
	if string(d1) != string(d2) || d1 == nil {
		t.Errorf("sets: [/tag]: %s and %s differ", d1, d2)
	}
}

// TestMultipartRefused: a body the gateway cannot read as multipart/form-data is invalid, and one
// of more parts than the value budget allows is too complex.
func TestMultipartRefused(t *testing.T) {
	t.Parallel()
	c, _ := Compile(Fields{Format: FormatMultipart})
	doc := func(ct, body string, maxValues int) error {
		_, err := c.Document(&Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {ct}}, Body: []byte(body), MaxValues: maxValues})
		return err
	}
	ok := "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b--\r\n"
	for _, tc := range []struct {
		name, ct, body string
	}{
		{"no boundary", "multipart/form-data", ok},
		{"not multipart", "application/json", `{"a":1}`},
		{"no closing boundary", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1"},
		{"no name", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data\r\n\r\n1\r\n--b--\r\n"},
		{"not form-data", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: attachment; name=a\r\n\r\n1\r\n--b--\r\n"},
		{"headers too large", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=a\r\nX-Pad: " + strings.Repeat("x", MaxMultipartHeaderBytes) + "\r\n\r\n1\r\n--b--\r\n"},
		{"bad part type", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=a\r\nContent-Type: /\r\n\r\n1\r\n--b--\r\n"},
	} {
		if err := doc(tc.ct, tc.body, 0); !errors.Is(err, ErrInvalidBody) {
			t.Errorf("%s: %v, want ErrInvalidBody", tc.name, err)
		}
	}
	if err := doc("multipart/form-data; boundary=b", ok, 0); err != nil {
		t.Errorf("a good body: %v", err)
	}
	many := strings.Repeat("--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n", 20) + "--b--\r\n"
	if err := doc("multipart/form-data; boundary=b", many, 20*multipartPartValues-1); !errors.Is(err, ErrBodyTooComplex) {
		t.Errorf("20 parts over a budget for 19: %v, want ErrBodyTooComplex", err)
	}
	if err := doc("multipart/form-data; boundary=b", many, 20*multipartPartValues); err != nil {
		t.Errorf("20 parts within the budget: %v", err)
	}
}

// TestMultipartAsGoReadsIt: the parts are those Go's mime/multipart gives an upstream, so that two
// bodies are one effect only when an upstream reads them alike (each row found by trying to break
// the parser): the line end of the first delimiter line is the one that starts the others, so a
// CRLF body whose content holds "\n--b" is one part; the boundary with more after it on its line
// is content; "--b--junk" closes nothing; quoted-printable content counts decoded, and another
// transfer encoding counts as a member; LF-only bodies are read.
func TestMultipartAsGoReadsIt(t *testing.T) {
	t.Parallel()
	const ct = "multipart/form-data; boundary=b"
	doc := func(body string) string {
		t.Helper()
		return string(multipartDocument(t, Fields{}, ct, []byte(body)))
	}
	file := func(headers, content string) string {
		return "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n" + headers + "\r\n" + content + "\r\n--b--\r\n"
	}
	// One file whose content holds a bare-LF delimiter and part headers, and two real files.
	one := doc("--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nx\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\ny\r\n--b--\r\n")
	two := doc("--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nx\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\ny\r\n--b--\r\n")
	if one == two || strings.Count(one, "sha256:") != 1 || strings.Count(two, "sha256:") != 2 {
		t.Errorf("a bare-LF delimiter in a CRLF body:\n%s\nwant one part, unlike the two-part\n%s", one, two)
	}
	if got := doc(file("", "x\r\n--bc\r\ny")); strings.Count(got, "sha256:") != 1 {
		t.Errorf("the boundary with more after it is content: %s", got)
	}
	raw, qp, rawEscaped := doc(file("", "x=y")), doc(file("Content-Transfer-Encoding: quoted-printable\r\n", "x=3Dy")), doc(file("", "x=3Dy"))
	if raw != qp || raw == rawEscaped {
		t.Errorf("quoted-printable x=3Dy must be raw x=y and not raw x=3Dy:\n%s\n%s\n%s", raw, qp, rawEscaped)
	}
	if got := doc(file("Content-Transfer-Encoding: base64\r\n", "eA==")); !strings.Contains(got, `"content_transfer_encoding":"base64"`) {
		t.Errorf("base64: %s", got)
	}
	if got := doc(file("Content-Transfer-Encoding: BINARY\r\n", "x=y")); got != raw {
		t.Errorf("an identity transfer encoding counts: %s", got)
	}
	lf := doc("--b\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\n\nx=y\n--b--\n")
	if lf != raw {
		t.Errorf("an LF-only body:\n%s\nwant\n%s", lf, raw)
	}
	c, _ := Compile(Fields{})
	for name, body := range map[string]string{
		"close delimiter with more after it": "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b--junk\r\n",
		"Content-Disposition twice":          "--b\r\nContent-Disposition: form-data; name=\"a\"; filename=\"evil.txt\"\r\nContent-Disposition: form-data; name=\"a\"; filename=\"a.txt\"\r\n\r\n1\r\n--b--\r\n",
		"a folded header line":               "--b\r\nContent-Disposition: form-data;\r\n name=a\r\n\r\n1\r\n--b--\r\n",
	} {
		if _, err := c.Document(&Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {ct}}, Body: []byte(body)}); !errors.Is(err, ErrInvalidBody) {
			t.Errorf("%s: %v, want ErrInvalidBody", name, err)
		}
	}
}
