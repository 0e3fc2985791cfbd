package redisstore

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/redistest"
)

// BenchmarkClaimCommitRedisCPU measures the Redis CPU time of one execution's writes, a Claim and a
// Commit of a fresh key with a 1.5 KiB and a 64 KiB payload (a DEL after each keeps memory flat;
// it is the same for both), from INFO cpu (used_cpu_user + used_cpu_sys), per execution. It
// compares two commit scripts: "reads-payload" is commit.lua as it was before load could skip the
// payload (it loads it, as claim does), "skips-payload" the commit script the store runs. They
// alternate in blocks of 100 executions against the same redis-server, so that both see the same
// machine; each reports its own <name>-redis-cpu-µs/op (ns/op is the mean of both).
//
//	go test ./redisstore -run '^$' -bench ClaimCommitRedisCPU -benchtime 20000x -count 3
func BenchmarkClaimCommitRedisCPU(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	client := redis.NewClient(opts)
	s, err := New(client, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	readsPayload := redis.NewScript(recordLua + strings.Replace(commitLua, "load(KEYS[1])", "load(KEYS[1], true)", 1))
	if readsPayload.Hash() == commitScript.Hash() {
		b.Fatal("commit.lua no longer calls load(KEYS[1]): update the baseline")
	}
	commits := []struct {
		name   string
		script *redis.Script
	}{{"reads-payload", readsPayload}, {"skips-payload", commitScript}}
	for _, size := range []struct {
		name  string
		bytes int
	}{{"1.5KiB", 1536}, {"64KiB", 64 << 10}} {
		payload := bytes.Repeat([]byte("x"), size.bytes)
		b.Run("payload="+size.name, func(b *testing.B) {
			execution := func(commit *redis.Script, i int) {
				key := "bench/" + strconv.Itoa(i)
				if claimed, _, _, err := s.Claim(ctx, key, "owner", payload, time.Minute, time.Hour); !claimed || err != nil {
					b.Fatalf("Claim = %v, %v", claimed, err)
				}
				n, err := commit.Run(ctx, client, []string{s.redisKey(key)}, "owner", payload, millis(time.Hour), s.settledChannel(key)).Int64()
				if n != 1 || err != nil {
					b.Fatalf("commit = %d, %v", n, err)
				}
				if err := client.Del(ctx, s.redisKey(key)).Err(); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range commits { // loads the scripts (EVAL after NOSCRIPT) outside the measurement
				execution(c.script, -1)
			}
			const block = 100
			var used [2]time.Duration
			var ops [2]int
			v, start, i := 0, redisCPU(b, client), 0
			for b.Loop() {
				execution(commits[v].script, i)
				ops[v]++
				i++
				if i%block == 0 {
					now := redisCPU(b, client)
					used[v] += now - start
					v, start = 1-v, now
				}
			}
			used[v] += redisCPU(b, client) - start
			for k, c := range commits {
				if ops[k] > 0 {
					b.ReportMetric(used[k].Seconds()*1e6/float64(ops[k]), c.name+"-redis-cpu-µs/op")
				}
			}
		})
	}
}

// redisCPU returns the CPU time that the Redis server has used, user plus system (INFO cpu).
func redisCPU(b *testing.B, client *redis.Client) time.Duration {
	b.Helper()
	info, err := client.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, value, _ := strings.Cut(line, ":")
		if name == "used_cpu_user" || name == "used_cpu_sys" {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				b.Fatalf("INFO cpu %s: %v", name, err)
			}
			total += v
		}
	}
	if total == 0 {
		b.Fatalf("no used_cpu_user or used_cpu_sys in INFO cpu: %q", info)
	}
	return time.Duration(total * float64(time.Second))
}
