package redisstore

// RedisKey exposes the key layout to the tests.
var RedisKey = (*Store).redisKey
