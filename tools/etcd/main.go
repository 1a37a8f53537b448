// Command etcd is the etcd server, built from the go.etcd.io/etcd/server/v3 module at
// the version pinned in this module's go.mod, so that the tests of etcdlock run against
// a current etcd without a system package (Debian ships etcd 3.4, which is out of
// support). scripts/build-etcd.sh builds it into the user's cache directory, where
// internal/testenv finds it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
