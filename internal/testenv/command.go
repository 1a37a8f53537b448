package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// RunCommand runs bin with args in dir (empty: the current directory) as the named
// user (empty: the current user) and returns its combined output. The error includes
// the output. Use it for one-shot tools such as initdb or redis-cli; ctx bounds it.
func RunCommand(ctx context.Context, userName, dir, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = withDeathSignal(&syscall.SysProcAttr{})
	if userName != "" {
		cred, err := credentialFor(userName)
		if err != nil {
			return nil, fmt.Errorf("testenv: run %s: %w", bin, err)
		}
		cmd.SysProcAttr.Credential = cred
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("testenv: %s %s: %w; output:\n%s", bin, strings.Join(args, " "), err, lastLines(out.Bytes(), logTailLines))
	}
	return out.Bytes(), nil
}

// LookBin finds the executable (or file) name: first in PATH, then in each
// candidate, which is an absolute path or a filepath.Glob pattern naming either a
// directory that holds name (/usr/lib/postgresql/*/bin) or a file itself
// (/usr/share/zookeeper/lib/zookeeper-*.jar). When a pattern matches several paths,
// the highest version wins (/usr/lib/postgresql/17 before /usr/lib/postgresql/9).
// The error wraps ErrNotInstalled and names what was searched.
func LookBin(name string, candidates ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, nil
		}
		return p, nil
	}
	for _, c := range candidates {
		matches, _ := filepath.Glob(c)
		sort.Slice(matches, func(i, j int) bool { return versionLess(matches[j], matches[i]) })
		for _, m := range matches {
			fi, err := os.Stat(m)
			if err != nil {
				continue
			}
			if fi.IsDir() {
				p := filepath.Join(m, name)
				if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
					return p, nil
				}
				continue
			}
			if fi.Mode().IsRegular() {
				return m, nil
			}
		}
	}
	where := "PATH"
	if len(candidates) > 0 {
		where += ", " + strings.Join(candidates, ", ")
	}
	return "", fmt.Errorf("testenv: %s not found (searched %s): %w", name, where, ErrNotInstalled)
}

// versionLess compares a and b as strings whose runs of digits compare as numbers.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		ca, ra := chunk(a)
		cb, rb := chunk(b)
		if ca != cb {
			na, ea := strconv.ParseUint(ca, 10, 64)
			nb, eb := strconv.ParseUint(cb, 10, 64)
			if ea == nil && eb == nil {
				return na < nb
			}
			return ca < cb
		}
		a, b = ra, rb
	}
	return len(a) < len(b)
}

// chunk splits s into its leading run of digits or of non-digits, and the rest.
func chunk(s string) (string, string) {
	digit := s[0] >= '0' && s[0] <= '9'
	i := 1
	for i < len(s) && (s[i] >= '0' && s[i] <= '9') == digit {
		i++
	}
	return s[:i], s[i:]
}

// sanitize makes name usable as a file name.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == ' ' {
			return '_'
		}
		return r
	}, name)
}

// tailFile returns the last n lines of the file at path, or a note why it cannot.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return lastLines(b, n)
}

func lastLines(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return "\t" + strings.Join(lines, "\n\t")
}
