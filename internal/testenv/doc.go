// Package testenv starts real servers (redis-server, ZooKeeper, etcd, PostgreSQL,
// MariaDB) as child processes for the tests of one package, on free loopback ports in
// temporary directories, and stops them when the tests end.
//
// A package's TestMain hands its setup to Main:
//
//	var redisSrv *testenv.Server
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, func(env *testenv.Env) error {
//			var err error
//			redisSrv, err = env.Redis()
//			return err
//		})
//	}
//
// Main runs setup; if it fails (for example because a server binary is not installed,
// see LookBin and ErrNotInstalled) it prints the error, naming the install command
// `bash scripts/install.sh`, and exits with status 1. Otherwise it runs the tests,
// stops every server the Env started, checks that no goroutines leaked (goleak), and
// exits with the tests' status.
//
// A *Server is one server process (or, when it came from an environment variable such
// as DISTLOCK_REDIS_ADDR, an External server that testenv did not start). Tests inject
// process faults with Kill (SIGKILL), Restart (same port, same data, same arguments;
// returns once the server answers again) and Pause/Resume (SIGSTOP/SIGCONT). These
// fail the calling test on an External server, because testenv cannot signal it.
//
// The generic core is Env.StartProcess (process.go): it chooses free ports, expands
// the ProcessSpec's argument templates, starts the process in its own process group
// (optionally as another user), and polls the spec's Ready function until the server
// answers. Each server-specific file (redis.go, zookeeper.go, etcd.go, postgres.go,
// mariadb.go) adds one Env method on top of it.
//
// Servers only ever listen on 127.0.0.1. Every child process is killed by the kernel
// (PR_SET_PDEATHSIG) if the test binary dies without stopping it, so a crashed or
// timed-out test run does not leave servers behind. Set DISTLOCK_TESTENV_KEEP=1 to keep
// the temporary directories (data and logs) after the run; their path is printed.
package testenv
