package canonical

import (
	"strings"
	"testing"
)

func TestLookupPrefix(t *testing.T) {
	t.Parallel()
	body := `{"pad0":[1,{"x":"y"}],"ticket":{"id":35436,"url":"https://x/1","tags":["a","b"],"n":1.50},"key":"OPS-1","pad":"` + strings.Repeat("x", 100) + `"}`
	tests := []struct {
		cut     int // bytes of body kept; 0 = all
		pointer string
		value   string
		ok      bool
	}{
		{0, "/key", "OPS-1", true},
		{0, "/ticket/id", "35436", true},
		{0, "/ticket/n", "1.5", true},
		{0, "/ticket/tags", `["a","b"]`, true},
		{0, "/ticket/tags/1", "b", true},
		{0, "/pad0/1/x", "y", true},
		{0, "/missing", "", false},
		{0, "/ticket/tags/2", "", false},
		{0, "/ticket/tags/01", "", false},
		{len(body) - 50, "/key", "OPS-1", true},
		{len(body) - 50, "/ticket/url", "https://x/1", true},
		{len(body) - 50, "/pad", "", false},
		{40, "/ticket/id", "", false},                         // cut inside the ticket object, before id is whole
		{strings.Index(body, `"key"`) + 9, "/key", "", false}, // cut inside the value
	}
	for _, tt := range tests {
		data := body
		if tt.cut > 0 {
			data = body[:tt.cut]
		}
		p, err := ParsePointer(tt.pointer)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := LookupPrefix([]byte(data), p)
		if v != tt.value || ok != tt.ok {
			t.Errorf("LookupPrefix(%d bytes, %s) = %q, %v; want %q, %v", len(data), tt.pointer, v, ok, tt.value, tt.ok)
		}
		if tt.cut == 0 {
			if lv, lok := Lookup([]byte(data), p); lv != v || lok != ok {
				t.Errorf("Lookup(%s) = %q, %v; LookupPrefix says %q, %v", tt.pointer, lv, lok, v, ok)
			}
		}
	}
}
