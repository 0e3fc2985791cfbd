package gateway_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

var (
	_ record.Store          = (*boltstore.Store)(nil)
	_ record.Store          = (*redisstore.Store)(nil)
	_ record.SettleNotifier = (*redisstore.Store)(nil)
)

// quiet drops go-redis's own log lines (a stopped server makes "failed to dial" lines); the tests
// report what matters themselves.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}
