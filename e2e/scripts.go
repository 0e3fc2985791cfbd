package e2e

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"path/filepath"
)

// ScriptSHAs returns the SHA1 by which EVALSHA names each transition's script. redisstore/scripts.go
// builds every script as record.lua followed by the transition's own file (settle.lua for a commit
// and a mark-unknown, told apart by their state argument: scriptCall); a change there leaves the
// rules matching nothing, which the run's assertion that every transition lost replies catches.
func ScriptSHAs() (map[string]string, error) {
	dir := filepath.Join(moduleRoot(), "redisstore", "scripts")
	common, err := os.ReadFile(filepath.Join(dir, "record.lua"))
	if err != nil {
		return nil, err
	}
	shas := map[string]string{}
	for _, script := range []string{"claim", "reclaim", "renew", "settle", "release"} {
		own, err := os.ReadFile(filepath.Join(dir, script+".lua"))
		if err != nil {
			return nil, err
		}
		sum := sha1.Sum(append(bytes.Clone(common), own...))
		shas[hex.EncodeToString(sum[:])] = script
	}
	return shas, nil
}

// settleOps are the transitions of the settle script, by its state argument.
var settleOps = map[string]string{"committed": "commit", "outcome_unknown": "mark_unknown"}

// ScriptCall returns the transition a command runs, by the name shas (scriptSHAs) gives its
// script, "" for none: EVALSHA of a known script, or EVAL of its source (go-redis sends it after a
// NOSCRIPT, on a Redis restarted from its AOF); and the record's Redis key, its KEYS[1].
func ScriptCall(shas map[string]string, args [][]byte) (op, key string) {
	if len(args) < 4 {
		return "", ""
	}
	switch string(bytes.ToLower(args[0])) {
	case "evalsha":
		op = shas[string(args[1])]
	case "eval":
		sum := sha1.Sum(args[1])
		op = shas[hex.EncodeToString(sum[:])]
	}
	if op == "settle" { // ARGV[5], after the script, the key count, the key and four ARGV
		op = ""
		if len(args) == 9 {
			op = settleOps[string(args[8])]
		}
	}
	if op == "" {
		return "", ""
	}
	return op, string(args[3])
}
