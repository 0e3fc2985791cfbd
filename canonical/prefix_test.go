package canonical

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// lookupPrefix is LookupPrefixes for one pointer that also tells an empty string value from an
// absent one (ok false).
func lookupPrefix(prefix []byte, p Pointer) (value string, ok bool) {
	var v [1]string
	var found [1]bool
	lookupPrefixes(prefix, []Pointer{p}, v[:], found[:])
	return v[0], found[0]
}

func TestLookupPrefix(t *testing.T) {
	t.Parallel()
	body := `{"pad0":[1,{"x":"y"}],"ticket":{"id":35436,"url":"https://x/1","tags":["a","b"],"n":1.50,"e":""},"key":"OPS-1","pad":"` + strings.Repeat("x", 100) + `"}`
	tests := []struct {
		cut     int // bytes of body kept; 0 = all
		pointer string
		value   string
		ok      bool
	}{
		{0, "/key", "OPS-1", true},
		{0, "/ticket/id", "35436", true},
		{0, "/ticket/n", "1.5", true},
		{0, "/ticket/e", "", true}, // an empty string, found
		{0, "/ticket/tags", `["a","b"]`, true},
		{0, "/ticket/tags/1", "b", true},
		{0, "/pad0/1/x", "y", true},
		{0, "/missing", "", false},
		{0, "/ticket/tags/2", "", false},
		{0, "/ticket/tags/01", "", false},
		{len(body) - 50, "/key", "OPS-1", true},
		{len(body) - 50, "/ticket/url", "https://x/1", true},
		{len(body) - 50, "/pad", "", false},
		{40, "/ticket/id", "", false},                                   // cut inside the ticket object, before id is whole
		{strings.Index(body, `"key"`) + 9, "/key", "", false},           // cut inside the value
		{strings.Index(body, `"key"`) + 13, "/key", "OPS-1", true},      // cut right after the value: a string is whole
		{strings.Index(body, `35436`) + 5, "/ticket/id", "", false},     // cut right after the number: it may go on
		{strings.Index(body, `35436`) + 6, "/ticket/id", "35436", true}, // a byte follows the number
		{strings.Index(body, `,"key"`), "/ticket", `{"e":"","id":35436,"n":1.5,"tags":["a","b"],"url":"https://x/1"}`, true},
	}
	for _, tt := range tests {
		data := body
		if tt.cut > 0 {
			data = body[:tt.cut]
		}
		p := mustPointer(t, tt.pointer)
		v, ok := lookupPrefix([]byte(data), p)
		if v != tt.value || ok != tt.ok {
			t.Errorf("lookupPrefix(%d bytes, %s) = %q, %v; want %q, %v", len(data), tt.pointer, v, ok, tt.value, tt.ok)
		}
		if tt.cut == 0 {
			if lv, lok := Lookup([]byte(data), p); lv != v || lok != ok {
				t.Errorf("Lookup(%s) = %q, %v; LookupPrefix says %q, %v", tt.pointer, lv, lok, v, ok)
			}
		}
	}
	if v, ok := lookupPrefix([]byte(body), Pointer{}); v != "" || ok {
		t.Errorf("lookupPrefix(zero Pointer) = %q, %v; want not found", v, ok)
	}
}

func TestLookupPrefixes(t *testing.T) {
	t.Parallel()
	const doc = `{"id":"T-1842","url":"https://t.example/T-1842","data":{"id":35436,"url":"https://x/1","n":1.50,"tags":["a","b"]},` +
		`"items":[{"id":1},{"id":2,"x":null},{"id":3}],"ok":true,"nil":null}`
	tests := []struct {
		name     string
		data     string
		pointers []string // "" stands for the zero Pointer
		want     []string
	}{
		{"several pointers", doc, []string{"/id", "/url", "/ok", "/nil"}, []string{"T-1842", "https://t.example/T-1842", "true", "null"}},
		{"shared prefix", doc, []string{"/data/id", "/data/url", "/data/n"}, []string{"35436", "https://x/1", "1.5"}},
		{"out of document order", doc, []string{"/items/1/id", "/id"}, []string{"2", "T-1842"}},
		{"arrays", doc, []string{"/items/0/id", "/items/2/id", "/items/1/x", "/data/tags/1", "/data/tags"}, []string{"1", "3", "null", "b", `["a","b"]`}},
		{"tokens that name no element", doc, []string{"/items/3", "/items/-", "/items/01", "/items/1e0", "/data/tags/x", "/items/99999999999999999999"}, []string{"", "", "", "", "", ""}},
		{"absent", doc, []string{"/missing", "/data/missing", "/id/0", "/ok/x", "/items/0/id/x", "/Id"}, []string{"", "", "", "", "", ""}},
		{"zero pointer", doc, []string{"", "/id", ""}, []string{"", "T-1842", ""}},
		{"no pointer", doc, []string{}, []string{}},
		{"object and array values", doc, []string{"/data", "/items/1"}, []string{`{"id":35436,"n":1.5,"tags":["a","b"],"url":"https://x/1"}`, `{"id":2,"x":null}`}},
		{"a value and a pointer into it", doc, []string{"/data/n", "/data", "/data/tags/0"}, []string{"1.5", `{"id":35436,"n":1.5,"tags":["a","b"],"url":"https://x/1"}`, "a"}},
		{"same pointer twice", doc, []string{"/id", "/id"}, []string{"T-1842", "T-1842"}},
		{"escaped names", `{"a/b":1,"m~n":2,"~1":3,"":4,"\u0069d":"x","a\/c":5,"é":6}`, []string{"/a~1b", "/m~0n", "/~01", "/", "/id", "/a~1c", "/é", "/m~1n"}, []string{"1", "2", "3", "4", "x", "5", "6", ""}},
		{"unicode escapes in values", `{"id":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/","n":"\u0000","raw":"é😀"}`, []string{"/id", "/n", "/raw"}, []string{"café 😀 \"q\" \\ /", "\x00", "é😀"}},
		{"canonical numbers", `{"a":1.50,"b":-0,"c":1E+2,"d":9007199254740993,"e":0.000001e-3,"f":-12.300e1}`, []string{"/a", "/b", "/c", "/d", "/e", "/f"}, []string{"1.5", "0", "100", "9007199254740993", "1e-9", "-123"}},
		{"array at the root", `[{"id":"a"},{"id":"b"}]`, []string{"/1/id", "/0/id", "/2/id"}, []string{"b", "a", ""}},
		{"scalar at the root", `"x"`, []string{"/id"}, []string{""}},
		{"white space", " \n{ \"data\" :\t{ \"id\" : 7 , \"url\" : \"u\" } }\r\n", []string{"/data/url", "/data/id", "/data"}, []string{"u", "7", `{"id":7,"url":"u"}`}},

		// Cut off.
		{"string cut off", `{"id":"T-18`, []string{"/id"}, []string{""}},
		{"string at the very end", `{"id":"T-1842"`, []string{"/id", "/url"}, []string{"T-1842", ""}},
		{"number at the very end", `{"id":12`, []string{"/id"}, []string{""}},
		{"number with a byte after it", `{"id":12 `, []string{"/id"}, []string{"12"}},
		{"number with a comma after it", `{"id":12,`, []string{"/id", "/url"}, []string{"12", ""}},
		{"number cut in its exponent", `{"id":12e`, []string{"/id"}, []string{""}},
		{"number cut after its point", `{"id":12.`, []string{"/id"}, []string{""}},
		{"literal at the very end", `{"ok":true`, []string{"/ok"}, []string{"true"}},
		{"literal cut off", `{"ok":tr`, []string{"/ok"}, []string{""}},
		{"object cut off", `{"data":{"id":1,"url":"u"`, []string{"/data", "/data/url", "/data/id"}, []string{"", "u", "1"}},
		{"object cut off after a number", `{"data":{"id":1`, []string{"/data", "/data/id"}, []string{"", ""}},
		{"cut inside a name", `{"id":"x","u`, []string{"/id", "/url"}, []string{"x", ""}},
		{"cut inside an array", `{"items":[{"id":1},{"id`, []string{"/items/0/id", "/items/1/id", "/items/0"}, []string{"1", "", `{"id":1}`}},
		{"cut before a member", `{"id":"x",`, []string{"/url"}, []string{""}},
		{"empty", ``, []string{"/id"}, []string{""}},

		// Not JSON.
		{"invalid before", `{"a":tru,"id":"x"}`, []string{"/id"}, []string{""}},
		{"invalid UTF-8 before", "{\"a\":\"\xff\",\"id\":\"x\"}", []string{"/id"}, []string{""}},
		{"lone surrogate before", `{"a":"\ud800","id":"x"}`, []string{"/id"}, []string{""}},
		{"invalid in the value", `{"id":"a\x"}`, []string{"/id"}, []string{""}},
		{"invalid between", `{"id":"x",,"url":"u"}`, []string{"/id", "/url"}, []string{"x", ""}},
		{"invalid after", `{"id":"x","url":"u",,<garbage`, []string{"/id", "/url"}, []string{"x", "u"}},
		{"invalid right after a string", `{"id":"x"!`, []string{"/id"}, []string{"x"}},
		{"invalid right after a number", `{"id":12!`, []string{"/id"}, []string{"12"}},
		{"data after the top-level value", `{"id":"x"} {"id":"y"}`, []string{"/id"}, []string{"x"}},
		{"not JSON", `<html>`, []string{"/id"}, []string{""}},
		{"a pointer into a broken value", `{"data":{"id":1,}`, []string{"/data", "/data/id"}, []string{"", "1"}},

		// Repeated member names.
		{"repeated name: the first read wins", `{"id":"first","id":"second"}`, []string{"/id"}, []string{"first"}},
		{"repeated name before a pointer settles", `{"id":"first","id":"second","url":"u"}`, []string{"/id", "/url"}, []string{"first", ""}},
		{"repeated name in a skipped value", `{"a":{"x":1,"x":2},"id":"x"}`, []string{"/id"}, []string{""}},
		{"repeated name after unescaping", `{"id":"a","\u0069d":"b","url":"u"}`, []string{"/id", "/url"}, []string{"a", ""}},
		{"repeated name after the last value", `{"id":"x","a":1,"a":2}`, []string{"/id"}, []string{"x"}},
		{"repeated name in the value", `{"data":{"id":1,"id":2},"url":"u"}`, []string{"/data", "/url"}, []string{"", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ps := make([]Pointer, len(tt.pointers))
			for i, s := range tt.pointers {
				if s != "" {
					ps[i] = mustPointer(t, s)
				}
			}
			got := LookupPrefixes([]byte(tt.data), ps...)
			if !slices.Equal(got, tt.want) {
				t.Errorf("LookupPrefixes(%s, %q) = %q; want %q", tt.data, tt.pointers, got, tt.want)
			}
			for i, p := range ps {
				if v, _ := lookupPrefix([]byte(tt.data), p); v != tt.want[i] {
					t.Errorf("lookupPrefix(%s, %q) = %q; LookupPrefixes says %q", tt.data, tt.pointers[i], v, tt.want[i])
				}
			}
		})
	}
}

// TestLookupPrefixesCutOff cuts a body at every byte: each value appears exactly once its last
// byte is kept (a number's, once a byte after it is), and then stays what Lookup gives.
func TestLookupPrefixesCutOff(t *testing.T) {
	t.Parallel()
	const body = `{"id":"T-1842","data":{"id":35436,"url":"https://x/1","n":1.50,"tags":["a","b"]},` +
		`"items":[{"id":1},{"id":2}],"ok":true,"esc":"caf\u00e9","last":-7}`
	tests := []struct {
		pointer string
		whole   string // the text that ends where the value becomes whole
	}{
		{"/id", `"id":"T-1842"`},
		{"/data/id", `"id":35436,`},
		{"/data/n", `"n":1.50,`},
		{"/data/tags", `"tags":["a","b"]`},
		{"/data/tags/1", `"tags":["a","b"`},
		{"/data", `"tags":["a","b"]}`},
		{"/items/1/id", `{"id":2`}, // 2 is whole once "}" follows it
		{"/items/1", `{"id":2}`},
		{"/ok", `"ok":true`},
		{"/esc", `"esc":"caf\u00e9"`},
		{"/last", `"last":-7}`},
	}
	for _, tt := range tests {
		p := mustPointer(t, tt.pointer)
		want, ok := Lookup([]byte(body), p)
		if !ok {
			t.Fatalf("Lookup(%s) found nothing", tt.pointer)
		}
		at := strings.Index(body, tt.whole) + len(tt.whole)
		if tt.whole == `{"id":2` {
			at++ // the "}" after the number
		}
		for n := 0; n <= len(body); n++ {
			v, ok := lookupPrefix([]byte(body[:n]), p)
			if ok != (n >= at) || ok && v != want || !ok && v != "" {
				t.Errorf("lookupPrefix(%q, %s) = %q, %v; want %q from %d bytes on", body[:n], tt.pointer, v, ok, want, at)
			}
		}
	}
}

// TestPropertyLookupPrefixesMatchesLookup: on a whole valid JSON text (without repeated names, as
// genValue makes them), LookupPrefixes gives what Lookup gives for every pointer; on the text cut
// anywhere, each value it finds is the whole text's, and it agrees with LookupPrefix.
func TestPropertyLookupPrefixesMatchesLookup(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(3, false).Draw(t, "value")
		text := []byte(spellJSON(t, v))
		paths := append(allPaths(v, "", false), "/absent", "/0", "/1/0", "/absent/deeper", "/")
		chosen := rapid.SliceOfN(rapid.SampledFrom(paths), 0, 4).Draw(t, "pointers")
		ps := make([]Pointer, len(chosen))
		for i, s := range chosen {
			ps[i] = rapidPointer(t, s)
		}
		wants := make([]string, len(ps))
		for i, p := range ps {
			wants[i], _ = Lookup(text, p)
		}
		if got := LookupPrefixes(text, ps...); !slices.Equal(got, wants) {
			t.Fatalf("LookupPrefixes(%s, %q) = %q; Lookup gives %q", text, chosen, got, wants)
		}
		cut := text[:rapid.IntRange(0, len(text)).Draw(t, "cut")]
		got := LookupPrefixes(cut, ps...)
		for i, p := range ps {
			v, ok := lookupPrefix(cut, p)
			if v != got[i] || ok && v != wants[i] {
				t.Fatalf("cut to %s: LookupPrefixes gives %q, LookupPrefix %q, %v for %s; the whole text %q", cut, got[i], v, ok, chosen[i], wants[i])
			}
		}
	})
}

// FuzzLookupPrefixes checks that LookupPrefixes never panics and agrees with LookupPrefix; on a
// text that Canonicalize accepts, with Lookup too, and on every cut of it, each value found is the
// whole text's and stays found in longer cuts.
func FuzzLookupPrefixes(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	var ps []Pointer
	for _, s := range []string{"/0", "/a", "/a/0", "/a/b", "/id", "/url", "/query", "/operationName", "/variables/i/t",
		"/params/name", "/params/arguments/title", "/items/1", "/title", "/", "/a~1b", "/0/query"} {
		ps = append(ps, mustPointer(f, s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got := LookupPrefixes(in, ps...)
		for i, p := range ps {
			if v, _ := lookupPrefix(in, p); v != got[i] {
				t.Fatalf("LookupPrefixes gives %q for %s, LookupPrefix %q", got[i], p, v)
			}
		}
		if _, err := Canonicalize(in); err != nil {
			return
		}
		wants := make([]string, len(ps))
		oks := make([]bool, len(ps))
		for i, p := range ps {
			wants[i], oks[i] = Lookup(in, p)
			if v, ok := lookupPrefix(in, p); v != wants[i] || ok != oks[i] {
				t.Fatalf("lookupPrefix(%s) = %q, %v; Lookup %q, %v", p, v, ok, wants[i], oks[i])
			}
		}
		step := max(1, len(in)/256)
		foundAt := make([]int, len(ps))
		for i := range foundAt {
			foundAt[i] = -1
		}
		for n := 0; n <= len(in); n += step {
			for i, p := range ps {
				v, ok := lookupPrefix(in[:n], p)
				switch {
				case ok && (!oks[i] || v != wants[i]):
					t.Fatalf("cut to %d bytes, %s is %q; whole, %q, %v", n, p, v, wants[i], oks[i])
				case ok && foundAt[i] < 0:
					foundAt[i] = n
				case !ok && foundAt[i] >= 0:
					t.Fatalf("%s found in %d bytes, not in %d", p, foundAt[i], n)
				}
			}
		}
	})
}

// prefixesSink keeps results on the heap, as the gateway's are.
var prefixesSink = make([]string, 1)

// TestLookupPrefixesAllocs: the result and the strings, nothing else (the tokenizer is pooled). It
// runs under -race too, which is how CI runs it: there sync.Pool drops a quarter of its
// Puts at random, so the exact count is taken on a pass with a warm scan of its own (the pool not
// involved), and the pooled path is bounded: a pool hit costs the exact count, a miss what a pass
// on a fresh scan costs; with the race detector's drops the average stays far below halfway
// between the two (a quarter of the way, on average: over 400 runs, reaching halfway takes 200
// drops where 100 are expected, more than ten standard deviations), and a scan that is never
// reused reaches it.
func TestLookupPrefixesAllocs(t *testing.T) {
	body := benchResponse(64 << 10)
	id, url, n, absent := mustPointer(t, "/id"), mustPointer(t, "/url"), mustPointer(t, "/ticket/comments/1/score"), mustPointer(t, "/ticket/absent/x")
	tests := []struct {
		name string
		ps   []Pointer
		want float64 // the result and one string per value found
	}{
		{"two strings", []Pointer{id, url}, 3},
		{"a number and an absent member", []Pointer{n, absent}, 2},
		{"one string", []Pointer{url}, 2},
	}
	for _, tt := range tests {
		pass := func(s *prefixScan) {
			values := make([]string, len(tt.ps))
			s.lookup(body, tt.ps, values, nil)
			prefixesSink = values
		}
		warm := newPrefixScan()
		pass(warm)
		if got := testing.AllocsPerRun(100, func() { pass(warm) }); got != tt.want {
			t.Errorf("%s: a pass on a warm scan: %v allocations; want %v", tt.name, got, tt.want)
		}
		fresh := testing.AllocsPerRun(100, func() { pass(newPrefixScan()) })
		if fresh < tt.want+2 {
			t.Fatalf("%s: a pass on a fresh scan: %v allocations, too few to tell a pool miss from a hit", tt.name, fresh)
		}
		pooled := testing.AllocsPerRun(400, func() { prefixesSink = LookupPrefixes(body, tt.ps...) })
		switch {
		case !raceEnabled && pooled != tt.want:
			t.Errorf("%s: LookupPrefixes: %v allocations; want %v", tt.name, pooled, tt.want)
		case raceEnabled && pooled > tt.want+(fresh-tt.want)/2:
			t.Errorf("%s: LookupPrefixes under -race: %v allocations; a pass costs %v on a reused scan and %v on a fresh one, "+
				"so the pool is not reused", tt.name, pooled, tt.want, fresh)
		}
	}
}
