package mcpfront

import (
	"strings"
	"testing"
)

// TestWatchedBodySeesAcrossReads: notifications/tools/list_changed is found in a pass-through
// stream whatever the sizes of the reads that bring it, and not found in one without it.
func TestWatchedBodySeesAcrossReads(t *testing.T) {
	t.Parallel()
	stream := `event: message` + "\n" + `data: {"jsonrpc":"2.0","method":"` + methodListChanged + `"}` + "\n\n"
	for size := 1; size <= len(stream); size++ {
		for _, s := range []string{stream, strings.Replace(stream, "list_changed", "list_chonged", 1)} {
			b := &watchedBody{}
			found := false
			for i := 0; i < len(s); i += size {
				found = b.sees([]byte(s[i:min(i+size, len(s))])) || found
			}
			if want := s == stream; found != want {
				t.Fatalf("reads of %d bytes: found %v, want %v", size, found, want)
			}
		}
	}
}
