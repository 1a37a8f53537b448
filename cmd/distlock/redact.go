package main

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Secrets in a backend URL are its password and the values of its query
// parameters whose names say they are secret (sentinel_password=...). distlock
// prints a URL only as redacted returns it, and passes every message that a client
// library wrote through a redactor, which replaces the places where a library can
// quote a secret (the whole URL, "user:password@", "password=...") and never the
// bare password text: replacing that everywhere garbles messages (a password "1"
// turned 127.0.0.1 into xxxxx27.0.0.xxxxx) and shows a short password by the
// pattern of what was replaced.

// mask replaces a secret.
const mask = "xxxxx"

// isSecretParam reports whether a query parameter named name holds a secret.
func isSecretParam(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"password", "passwd", "secret", "token", "sslkey"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// redacted returns u for messages: its password and secret query values
// replaced by xxxxx (url.URL.Redacted), the hosts as given.
func (u *backendURL) redacted() string {
	// An opaque part with an '@' is more likely a URL without "//" than a file
	// name: hide what may be a password in it.
	v := &url.URL{Scheme: u.scheme, User: u.user, Opaque: redactLoose(u.opaque)}
	if u.hier {
		v.Host, v.Path = strings.Join(u.hosts, ","), u.path
	}
	// The query as the user wrote it (openers take parameters out of u.query),
	// unless it holds a secret.
	_, rawQuery, _ := strings.Cut(u.raw, "?")
	q, _ := url.ParseQuery(rawQuery)
	secret := false
	for k := range q {
		secret = secret || isSecretParam(k)
	}
	v.RawQuery = rawQuery
	if secret {
		for k := range q {
			if isSecretParam(k) {
				q[k] = []string{mask}
			}
		}
		v.RawQuery = strings.ReplaceAll(q.Encode(), url.QueryEscape(mask), mask)
	}
	return v.Redacted()
}

// redactLoose hides what may be a password in raw, a backend URL that could not
// be parsed: everything before its last '@'.
func redactLoose(raw string) string {
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		return mask + raw[i:]
	}
	return raw
}

// A redactor removes the secrets of one backend URL from messages. The zero
// redactor (nil) changes nothing.
type redactor struct {
	r *strings.Replacer
}

// newRedactor returns the redactor of u.
func newRedactor(u *backendURL) *redactor {
	red := u.redacted()
	var pairs []string
	add := func(secretText, replacement string) {
		if secretText != "" && secretText != replacement {
			pairs = append(pairs, secretText, replacement)
		}
	}
	add(u.raw, red)
	add(strings.Trim(strconv.Quote(u.raw), `"`), red)
	if u.user != nil {
		if p, ok := u.user.Password(); ok && p != "" {
			info := url.UserPassword(u.user.Username(), p).String()
			escaped := info[strings.Index(info, ":")+1:] // a user name has its ':' escaped
			for _, form := range []string{p, escaped, url.PathEscape(p), url.QueryEscape(p)} {
				add(":"+form+"@", ":"+mask+"@")
			}
		}
	}
	for k, vals := range u.query {
		if !isSecretParam(k) {
			continue
		}
		for _, v := range vals {
			if v == "" {
				continue
			}
			for _, form := range []string{v, url.QueryEscape(v)} {
				add(k+"="+form, k+"="+mask)
				add(k+"='"+form+"'", k+"="+mask)
			}
		}
	}
	// Longer secrets first: at one position, a Replacer tries the pairs in order.
	type pair struct{ old, new string }
	ps := make([]pair, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		ps = append(ps, pair{pairs[i], pairs[i+1]})
	}
	slices.SortStableFunc(ps, func(a, b pair) int { return len(b.old) - len(a.old) })
	flat := make([]string, 0, len(pairs))
	for _, p := range ps {
		flat = append(flat, p.old, p.new)
	}
	return &redactor{r: strings.NewReplacer(flat...)}
}

// text returns s without the secrets.
func (r *redactor) text(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// A redactedError is an error whose message had secrets removed; it still
// unwraps to the original, so errors.Is works.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// wrap returns err with the secrets removed from its message; a usage error
// stays one.
func (r *redactor) wrap(err error) error {
	if err == nil {
		return nil
	}
	var out error = &redactedError{msg: r.text(err.Error()), err: err}
	if isUsage(err) {
		out = &usageError{out}
	}
	return out
}

// redactErr returns err with u's secrets removed from its message, prefixed with
// prefix and ": " when prefix is not empty.
func redactErr(prefix string, err error, u *backendURL) error {
	msg := newRedactor(u).text(err.Error())
	if prefix != "" {
		msg = prefix + ": " + msg
	}
	return &redactedError{msg: msg, err: err}
}

// redactorFor returns the redactor of the backend URL that run, status or check
// will open: raw, else DISTLOCK_BACKEND in env; nil when there is none or it does
// not parse (openBackend then reports it, redacted).
func redactorFor(raw string, env []string) *redactor {
	if raw == "" {
		raw, _ = lookupEnv(env, envBackend)
	}
	if raw == "" {
		return nil
	}
	u, err := parseBackendURL(raw)
	if err != nil {
		return nil
	}
	return newRedactor(u)
}
