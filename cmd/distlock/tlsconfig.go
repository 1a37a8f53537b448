package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strconv"
)

// TLS query parameters, the same on redis://, rediss://, redis-sentinel://,
// redlock://, etcd:// and zk:// URLs:
//
//	tls=true                  connect with TLS (rediss:// does by default)
//	ca_file=PATH              PEM certificates of the CAs that sign the servers'
//	                          certificates (default: the system's)
//	cert_file=PATH&key_file=PATH
//	                          a client certificate and its key (PEM), for servers
//	                          that ask for one
//	server_name=NAME          the name the servers' certificates must carry
//	                          (default: the host name in the URL)
//	insecure_skip_verify=true accept any certificate (tests only)
//
// Any of them but tls=false turns TLS on.
var tlsParams = []string{"tls", "ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify"}

// takeTLS removes the TLS parameters from u's query and returns the TLS
// configuration they ask for, or nil for a plain connection. on is the scheme's
// default (rediss://).
func takeTLS(u *backendURL, on bool) (*tls.Config, error) {
	get := func(name string) (string, bool, error) {
		vals, ok := u.query[name]
		delete(u.query, name)
		if !ok {
			return "", false, nil
		}
		if len(vals) != 1 || vals[0] == "" {
			return "", false, badURL(u, "%s wants one value", name)
		}
		return vals[0], true, nil
	}
	var vals [6]string
	var given [6]bool
	for i, name := range tlsParams {
		v, ok, err := get(name)
		if err != nil {
			return nil, err
		}
		vals[i], given[i] = v, ok
	}
	tlsOn, caFile, certFile, keyFile, serverName, skip := vals[0], vals[1], vals[2], vals[3], vals[4], vals[5]
	anyGiven := false
	for _, g := range given[1:] {
		anyGiven = anyGiven || g
	}
	if given[0] {
		b, err := strconv.ParseBool(tlsOn)
		if err != nil {
			return nil, badURL(u, "tls=%s: want true or false", quoteArg(tlsOn))
		}
		if !b && anyGiven {
			return nil, badURL(u, "tls=false with other TLS parameters (ca_file, cert_file, key_file, server_name, insecure_skip_verify)")
		}
		on = b
	}
	if !on && !anyGiven {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if given[5] {
		b, err := strconv.ParseBool(skip)
		if err != nil {
			return nil, badURL(u, "insecure_skip_verify=%s: want true or false", quoteArg(skip))
		}
		cfg.InsecureSkipVerify = b
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, badURL(u, "ca_file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, badURL(u, "ca_file %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, badURL(u, "cert_file and key_file go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, badURL(u, "cert_file, key_file: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// isTLSRefusal reports whether err is a TLS failure that retrying cannot mend: a
// certificate that does not verify, or a server that does not speak TLS.
func isTLSRefusal(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &unknown) ||
		errors.As(err, &hostname) || errors.As(err, &invalid)
}
