package main

import (
	"strings"
	"testing"
)

// stream is test2json's output of a package with a slow test, a fast one, a subtest and a failure,
// and of a second package that passed.
const stream = `{"Action":"run","Package":"p/a","Test":"TestSlow"}
{"Action":"output","Package":"p/a","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"pass","Package":"p/a","Test":"TestSlow","Elapsed":4.5}
{"Action":"output","Package":"p/a","Test":"TestFails","Output":"    a_test.go:9: want 1, got 2\n"}
{"Action":"fail","Package":"p/a","Test":"TestFails","Elapsed":0.2}
{"Action":"pass","Package":"p/a","Test":"TestFast/sub","Elapsed":0.05}
{"Action":"pass","Package":"p/a","Test":"TestFast","Elapsed":0.1}
{"Action":"fail","Package":"p/a","Elapsed":5.1}
# p/b [build output that is no event]
{"Action":"pass","Package":"p/b","Elapsed":1.5}
`

func TestReport(t *testing.T) {
	var out strings.Builder
	failed, err := report(strings.NewReader(stream), &out, 2)
	if err != nil || !failed {
		t.Fatalf("report = %v, %v; want failed, no error", failed, err)
	}
	got := out.String()
	for _, want := range []string{
		"a_test.go:9: want 1, got 2", // a failure's output
		"# p/b [build output",        // a line that is no event, as it came
		"Fail p/a\t5.1s", "Pass p/b\t1.5s",
		"Packages by time:\n     5.1s  p/a  FAIL\n     1.5s  p/b\n",
		"The 2 slowest tests:\n     4.5s  p/a TestSlow\n     0.2s  p/a TestFails  FAIL\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN   TestSlow") {
		t.Errorf("report shows the output of a test that passed:\n%s", got)
	}
}

func TestReportAllPassed(t *testing.T) {
	var out strings.Builder
	failed, err := report(strings.NewReader(`{"Action":"pass","Package":"p/b","Elapsed":1.5}`+"\n"), &out, 15)
	if err != nil || failed {
		t.Fatalf("report = %v, %v; want not failed", failed, err)
	}
}
