package mcpwire

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf8"
)

// DecodeHeader decodes an Mcp-Name / Mcp-Method value: plain, or `=?base64?<b64>?=` (the
// 2026-07-28 encoding of names that are not plain printable ASCII, standard base64 with padding,
// as the go-sdk writes it). Error when the base64 or its UTF-8 is bad.
func DecodeHeader(v string) (string, error) {
	enc, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, nil
	}
	if enc, ok = strings.CutSuffix(enc, "?="); !ok {
		return v, nil
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	switch {
	case err != nil:
		return "", errors.New("mcpwire: header value: bad base64")
	case !utf8.Valid(b):
		return "", errors.New("mcpwire: header value: base64 of bytes that are not UTF-8")
	}
	return string(b), nil
}
