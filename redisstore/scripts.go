package redisstore

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua sources, one per transition (a commit and a mark-unknown are one settle, to the state
// they are given), each prefixed with the shared helpers of record.lua.
var (
	//go:embed scripts/record.lua
	recordLua string
	//go:embed scripts/claim.lua
	claimLua string
	//go:embed scripts/reclaim.lua
	reclaimLua string
	//go:embed scripts/renew.lua
	renewLua string
	//go:embed scripts/settle.lua
	settleLua string
	//go:embed scripts/release.lua
	releaseLua string
	//go:embed scripts/get.lua
	getLua string
)

// The scripts, run with Script.Run: EVALSHA, and EVAL when the server answers NOSCRIPT.
var (
	claimScript   = redis.NewScript(recordLua + claimLua)
	reclaimScript = redis.NewScript(recordLua + reclaimLua)
	renewScript   = redis.NewScript(recordLua + renewLua)
	settleScript  = redis.NewScript(recordLua + settleLua)
	releaseScript = redis.NewScript(recordLua + releaseLua)
	getScript     = redis.NewScript(recordLua + getLua)
)
