package redisx_test

import (
	"testing"

	"github.com/distlock/distlock/internal/testenv"
)

// redisSrv is the redis-server of this package's tests, started once by TestMain.
var redisSrv *testenv.Server

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) error {
		var err error
		redisSrv, err = e.Redis()
		return err
	})
}
