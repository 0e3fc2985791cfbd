package redisstore

// RedisKey exposes the key layout to the tests.
var RedisKey = (*Store).redisKey

// SettledChannel exposes the settle notices' channel of a key to the tests.
var SettledChannel = (*Store).settledChannel
