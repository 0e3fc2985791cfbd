package main

import (
	"maps"
	"testing"
)

func TestParseCommandStats(t *testing.T) {
	t.Parallel()
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=2000,usec=51000,usec_per_call=25.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hset:calls=4000,usec=8000,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n"
	got, err := parseCommandStats(info)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"evalsha": 2000, "hset": 4000, "info": 3}
	if !maps.Equal(got, want) {
		t.Errorf("parseCommandStats = %v, want %v", got, want)
	}
	if _, err := parseCommandStats("# Commandstats\r\n"); err == nil {
		t.Error("parseCommandStats of no cmdstat line: no error")
	}
	if _, err := parseCommandStats("cmdstat_get:calls=x,usec=1\r\n"); err == nil {
		t.Error("parseCommandStats of a bad count: no error")
	}
}

func TestCommandDelta(t *testing.T) {
	t.Parallel()
	before := map[string]int64{"evalsha": 100, "hset": 10, "info": 1, "ping": 7}
	after := map[string]int64{"evalsha": 300, "hset": 210, "info": 2, "ping": 7, "publish": 100}
	got := commandDelta(before, after, 100)
	want := map[string]float64{"evalsha": 2, "hset": 2, "publish": 1} // info is the harness's own; ping did not move
	if !maps.Equal(got, want) {
		t.Errorf("commandDelta = %v, want %v", got, want)
	}
}
