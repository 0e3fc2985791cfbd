package redisstore

import "strings"

// keyEscaper escapes the two characters that would break the hash tag or injectivity: "}" would end
// the hash tag early, and "%" is the escape character itself.
var keyEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

// redisKey returns the Redis key of the record at key: <prefix>{<escaped key>}. The prefix holds no
// "{" (New checks), so the hash tag is the whole escaped key.
func (s *Store) redisKey(key string) string {
	return s.prefix + "{" + keyEscaper.Replace(key) + "}"
}
