package chaos

import (
	"testing"

	"github.com/idemgateway/idemgateway/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m) }
