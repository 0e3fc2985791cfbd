package canonical

import "testing"

func TestSetString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		data, pointer, value, want, err string
	}{
		{data: `{"a":1}`, pointer: "/external_id", value: "k", want: `{"a":1,"external_id":"k"}`},
		{data: `{"n":9007199254740993,"x":1.50}`, pointer: "/id", value: "k", want: `{"id":"k","n":9007199254740993,"x":1.50}`},
		{data: `{"meta":{"id":"old"}}`, pointer: "/meta/id", value: "<new>&", want: `{"meta":{"id":"<new>&"}}`},
		{data: `{"items":["a","b"]}`, pointer: "/items/1", value: "k", want: `{"items":["a","k"]}`},
		{data: `{"a":1}`, pointer: "/meta/id", err: "invalid body: /meta/id: the parent of the member does not exist"},
		{data: `{"items":[]}`, pointer: "/items/0", err: `invalid body: /items/0: no element "0"`},
		{data: `[1]`, pointer: "/x", err: `invalid body: /x: no element "x"`},
		{data: `"s"`, pointer: "/x", err: "invalid body: /x: the parent is not an object or array"},
		{data: `{`, pointer: "/x", err: "invalid body: unexpected EOF"},
	}
	for _, tt := range tests {
		p, err := ParsePointer(tt.pointer)
		if err != nil {
			t.Fatal(err)
		}
		got, err := SetString([]byte(tt.data), p, tt.value)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("SetString(%s, %s) error = %v, want %q", tt.data, tt.pointer, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("SetString(%s, %s) = %s, %v; want %s", tt.data, tt.pointer, got, err, tt.want)
		}
	}
}

func TestLookupJSON(t *testing.T) {
	t.Parallel()
	data := []byte(`{"s":"42","n":42.0,"o":{"b":1,"a":null},"z":null}`)
	for pointer, want := range map[string]string{"/s": `"42"`, "/n": `42`, "/o": `{"a":null,"b":1}`, "/z": `null`, "/missing": ``} {
		got, ok := LookupJSON(data, mustPointer(t, pointer))
		if string(got) != want || ok != (want != "") {
			t.Errorf("LookupJSON(%s) = %s, %v; want %s", pointer, got, ok, want)
		}
	}
}
