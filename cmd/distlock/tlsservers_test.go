package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/distlock/distlock/internal/testenv"
)

// testCerts are a CA and a server certificate for 127.0.0.1 and localhost that it
// signed, as PEM files, made for the TLS servers of this test binary.
type testCerts struct {
	dir                 string
	ca, cert, key, both string // both: the key and the certificate in one file (ZooKeeper's PEM key store)
	pool                *x509.CertPool
}

// makeCerts writes a new CA and server certificate into dir.
func makeCerts(dir string) (*testCerts, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "distlock test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	c := &testCerts{dir: dir, ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "server.pem"),
		key: filepath.Join(dir, "server-key.pem"), both: filepath.Join(dir, "server-both.pem"), pool: x509.NewCertPool()}
	c.pool.AddCert(caCert)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	for path, b := range map[string][]byte{c.ca: caPEM, c.cert: certPEM, c.key: keyPEM, c.both: append(append([]byte{}, keyPEM...), certPEM...)} {
		// World-readable: servers may run as another user.
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// clientTLS returns a TLS configuration that trusts the test CA.
func (c *testCerts) clientTLS() *tls.Config {
	return &tls.Config{RootCAs: c.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// startRedisTLS starts a redis-server that listens only for TLS.
func startRedisTLS(env *testenv.Env, c *testCerts) (*testenv.Server, error) {
	bin, err := testenv.LookBin("redis-server")
	if err != nil {
		return nil, err
	}
	return env.StartProcess(testenv.ProcessSpec{
		Name: "redis-tls",
		Bin:  bin,
		Args: []string{"--port", "0", "--tls-port", "{port}", "--bind", "127.0.0.1", "--protected-mode", "no",
			"--dir", "{dir}", "--daemonize", "no", "--logfile", "", "--save", "", "--appendonly", "yes", "--appendfsync", "always",
			"--tls-cert-file", c.cert, "--tls-key-file", c.key, "--tls-ca-cert-file", c.ca, "--tls-auth-clients", "no"},
		Ready: func(ctx context.Context, addr string) error {
			conn, err := (&tls.Dialer{Config: c.clientTLS()}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			defer conn.Close()
			if d, ok := ctx.Deadline(); ok {
				conn.SetDeadline(d)
			}
			if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
				return err
			}
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				return err
			}
			if strings.TrimSpace(line) != "+PONG" {
				return fmt.Errorf("PING answered %q", line)
			}
			return nil
		},
	})
}

// startEtcdTLS starts a single-member etcd whose client URL is https.
func startEtcdTLS(env *testenv.Env, c *testCerts) (*testenv.Server, error) {
	bin, err := testenv.EtcdBin()
	if err != nil {
		return nil, err
	}
	return env.StartProcess(testenv.ProcessSpec{
		Name: "etcd-tls",
		Bin:  bin,
		Args: []string{"--name", "tls", "--data-dir", "{dir}/data",
			"--listen-client-urls", "https://127.0.0.1:{port0}", "--advertise-client-urls", "https://127.0.0.1:{port0}",
			"--listen-peer-urls", "http://127.0.0.1:{port1}", "--initial-advertise-peer-urls", "http://127.0.0.1:{port1}",
			"--initial-cluster", "tls=http://127.0.0.1:{port1}", "--cert-file", c.cert, "--key-file", c.key,
			"--unsafe-no-fsync", "--heartbeat-interval", "50", "--election-timeout", "500"},
		Ports: 2,
		Ready: func(ctx context.Context, addr string) error {
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: c.clientTLS()}}
			defer client.CloseIdleConnections()
			req, err := http.NewRequestWithContext(ctx, "GET", "https://"+addr+"/health", nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(b), `"health":"true"`) {
				return fmt.Errorf("health: %s", b)
			}
			return nil
		},
		ReadyTimeout: 60 * time.Second,
	})
}

// startZooKeeperTLS starts a standalone ZooKeeper that listens only on a secure
// client port (Netty, PEM key and trust stores), with the default forceSync=yes.
func startZooKeeperTLS(env *testenv.Env, c *testCerts) (*testenv.Server, error) {
	java, err := testenv.LookBin("java", "/usr/lib/jvm/*/bin")
	if err != nil {
		return nil, err
	}
	jars := []string{"/usr/share/java", "/usr/share/zookeeper", "/usr/share/zookeeper/lib"}
	classpath, err := testenv.LookBin("zookeeper.jar", jars...) // its manifest names netty and the rest
	if err != nil {
		return nil, err
	}
	// The secure port needs netty's codec, which the manifest does not name.
	for _, jar := range []string{"netty-codec.jar", "netty-resolver.jar", "slf4j-simple.jar"} {
		if p, err := testenv.LookBin(jar, "/usr/share/java"); err == nil {
			classpath += string(os.PathListSeparator) + p
		}
	}
	return env.StartProcess(testenv.ProcessSpec{
		Name: "zookeeper-tls",
		Bin:  java,
		Args: []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
			"-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
			"-Dzookeeper.ssl.keyStore.location=" + c.both, "-Dzookeeper.ssl.keyStore.type=PEM",
			"-Dzookeeper.ssl.trustStore.location=" + c.ca, "-Dzookeeper.ssl.trustStore.type=PEM",
			"-Dzookeeper.ssl.clientAuth=none",
			"-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", "{dir}/zoo.cfg"},
		Prepare: func(s *testenv.Server) error {
			cfg := fmt.Sprintf("tickTime=200\nminSessionTimeout=400\nmaxSessionTimeout=30000\ndataDir=%s\n"+
				"secureClientPort=%d\nsecureClientPortAddress=127.0.0.1\nadmin.enableServer=false\n"+
				"4lw.commands.whitelist=srvr,mntr\n", filepath.Join(s.Dir, "data"), s.Port())
			return os.WriteFile(filepath.Join(s.Dir, "zoo.cfg"), []byte(cfg), 0o644)
		},
		Ready: func(ctx context.Context, addr string) error {
			out, err := zkFourLetter(ctx, addr, "srvr", c.clientTLS())
			if err != nil {
				return err
			}
			if !strings.Contains(out, "Mode: standalone") {
				return fmt.Errorf("srvr answered %q", out)
			}
			return nil
		},
		ReadyTimeout: 60 * time.Second,
		StopTimeout:  10 * time.Second,
	})
}
