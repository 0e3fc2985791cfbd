package mcpwire

import "testing"

func TestDecodeHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, v, want string
		err           bool
	}{
		{"plain", "tools/call", "tools/call", false},
		{"empty", "", "", false},
		{"non-ASCII name", "=?base64?Y3LDqWVyX3RpY2tldA==?=", "créer_ticket", false},
		{"encoded sentinel", "=?base64?PT9iYXNlNjQ/YT89?=", "=?base64?a?=", false},
		{"leading space kept", "=?base64?IHg=?=", " x", false},
		{"empty base64", "=?base64??=", "", false},
		{"no suffix: plain", "=?base64?eA==", "=?base64?eA==", false},
		{"no prefix: plain", "eA==?=", "eA==?=", false},
		{"prefix is case sensitive", "=?BASE64?eA==?=", "=?BASE64?eA==?=", false},
		{"bad base64", "=?base64?e*A=?=", "", true},
		{"missing padding", "=?base64?eA?=", "", true},
		{"URL alphabet", "=?base64?_-8=?=", "", true},
		{"not UTF-8", "=?base64?/w==?=", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeHeader(tt.v)
			if got != tt.want || (err != nil) != tt.err {
				t.Errorf("DecodeHeader(%q) = %q, %v; want %q, error %v", tt.v, got, err, tt.want, tt.err)
			}
		})
	}
}
