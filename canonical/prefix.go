package canonical

import (
	"bytes"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// LookupPrefix is Lookup over the first bytes of a JSON text that may have been cut off, as when
// a response body is larger than the gateway keeps: it returns the value at p if that whole value
// lies in prefix, reading values in order and skipping the ones p does not point into. ok is false
// when p is absent from prefix, its value is cut off, or the bytes before it are not JSON.
func LookupPrefix(prefix []byte, p Pointer) (value string, ok bool) {
	if p.IsZero() {
		return "", false
	}
	dec := jsontext.NewDecoder(bytes.NewReader(prefix))
	v, found := seek(dec, "", jsontext.Pointer(p.String()))
	if !found {
		return "", false
	}
	if v.Kind() == '"' {
		s, err := jsontext.AppendUnquote(nil, v)
		return string(s), err == nil
	}
	c, err := Canonicalize(v)
	return string(c), err == nil
}

// seek reads the value at path from dec and, if path leads to target, descends into it; it
// returns target's raw value once read whole.
func seek(dec *jsontext.Decoder, path, target jsontext.Pointer) (jsontext.Value, bool) {
	if path == target {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		v = v.Clone()
		// A number at the very end of the prefix may have been cut off: the value is whole only
		// if something follows it (target is never the root, so something must).
		return v, dec.PeekKind() != 0
	}
	if !path.Contains(target) {
		_ = dec.SkipValue() // an error here surfaces as PeekKind 0 in the caller's loop
		return nil, false
	}
	switch dec.PeekKind() {
	case '{':
		if _, err := dec.ReadToken(); err != nil {
			return nil, false
		}
		for dec.PeekKind() == '"' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, false
			}
			if v, found := seek(dec, path.AppendToken(name.String()), target); found {
				return v, found
			}
		}
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, false
		}
		for i := 0; dec.PeekKind() != ']' && dec.PeekKind() != 0; i++ {
			if v, found := seek(dec, path.AppendToken(strconv.Itoa(i)), target); found {
				return v, found
			}
		}
	}
	return nil, false
}
