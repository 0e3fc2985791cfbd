package admin

import (
	"net/http"
	"unicode/utf8"
)

// The views of a record that the operator console shows besides its receipt: the answer a
// replay sends, and the request that claimed the key (the fields its fingerprint covers), each
// bounded and shown only as UTF-8 text.

// maxTextView bounds the text a view shows (64 KiB).
const maxTextView = 64 << 10

// textView is bytes as a view shows them: up to maxTextView of them, cut on a character boundary,
// and only when they are UTF-8 text.
type textView struct {
	Bytes     int    `json:"bytes"`
	Text      string `json:"text,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Binary    bool   `json:"binary,omitempty"` // not UTF-8: not shown
}

func viewText(b []byte) textView {
	v := textView{Bytes: len(b)}
	if len(b) > maxTextView {
		cut := maxTextView // moved back to a rune's start, so that text is not made invalid by the cut
		for i := 0; i < utf8.UTFMax && !utf8.RuneStart(b[cut]); i++ {
			cut--
		}
		b, v.Truncated = b[:cut], true
	}
	if utf8.Valid(b) {
		v.Text = string(b)
	} else {
		v.Binary = true
	}
	return v
}

// responseView is the answer of GET …/response.
type responseView struct {
	Stored      bool   `json:"stored"` // false: the record holds no response (not committed, or resolved by hand)
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// BodyKept is false when the body was not kept (larger than the receipt limit, or broken):
	// replays send none. Body is then empty whatever the upstream sent.
	BodyKept bool      `json:"body_kept"`
	Body     *textView `json:"body,omitempty"`
}

func (a *admin) getResponse(w http.ResponseWriter, r *http.Request) {
	rec := a.readRecord(w, r)
	if rec == nil {
		return
	}
	v := responseView{}
	if resp := rec.Response; resp != nil {
		v = responseView{Stored: true, Status: resp.Status, ContentType: resp.Header.Get("Content-Type"), BodyKept: rec.ResponseBodyKept}
		if rec.ResponseBodyKept {
			body := viewText(resp.Body)
			v.Body = &body
		}
	}
	writeJSON(w, v)
}

// requestView is the answer of GET …/request: the canonical document of the request that claimed
// the key (the fields its effect fingerprint covers, as canonical JSON or the body format's
// document), which a record keeps up to record.MaxDocumentBytes.
type requestView struct {
	Kept     bool      `json:"kept"` // false: larger than the record keeps, or a record of a build that kept none
	Document *textView `json:"document,omitempty"`
}

func (a *admin) getRequest(w http.ResponseWriter, r *http.Request) {
	rec := a.readRecord(w, r)
	if rec == nil {
		return
	}
	v := requestView{Kept: rec.Document != nil}
	if v.Kept {
		doc := viewText(rec.Document)
		v.Document = &doc
	}
	writeJSON(w, v)
}
