package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// A Commit is the source a matrix run measured: the commit checked out and the
// uncommitted changes of its tree, read at the start of the run.
type Commit struct {
	// Hash is the full hash of HEAD; empty when it could not be read.
	Hash string
	// Changed lists the paths that `git status --porcelain` reported (modified,
	// added, deleted, renamed or untracked), relative to the repository's root:
	// empty for a clean tree.
	Changed []string
	// Err, when not empty, says why Hash, or whether the tree was clean, is
	// unknown.
	Err string
}

// maxChanged is how many changed paths a description names.
const maxChanged = 5

// ReadCommit reads HEAD and the uncommitted changes of the git work tree that
// holds dir. The files in skip (the run's own output: results and README, which
// it rewrites and which cannot change what it measures) do not count as changes.
// It never fails: what it could not read is in Commit.Err.
func ReadCommit(ctx context.Context, dir string, skip ...string) Commit {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				return "", fmt.Errorf("git %s: %s", args[0], msg)
			}
			return "", fmt.Errorf("git %s: %w", args[0], err)
		}
		return string(out), nil
	}
	var c Commit
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		c.Err = err.Error()
		return c
	}
	c.Hash = strings.TrimSpace(head)
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		c.Err = err.Error()
		return c
	}
	top = strings.TrimSpace(top)
	status, err := git("status", "--porcelain=v1", "-z", "--untracked-files=all")
	if err != nil {
		c.Err = err.Error()
		return c
	}
	ignore := map[string]bool{}
	for _, p := range skip {
		if p == "" {
			continue
		}
		if rel, ok := relTo(top, p); ok {
			ignore[rel] = true
		}
	}
	entries := strings.Split(status, "\x00")
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		if len(e) < 4 {
			continue
		}
		if e[0] == 'R' || e[0] == 'C' {
			i++ // a rename or copy is followed by its source path
		}
		if p := e[3:]; !ignore[p] {
			c.Changed = append(c.Changed, p)
		}
	}
	return c
}

// relTo returns path relative to the directory top, with forward slashes, when
// path lies under top. Both are made absolute first, and symbolic links in them
// are resolved where they exist (git reports top with links resolved).
func relTo(top, path string) (string, bool) {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			p = a
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		// A file that does not exist yet: resolve its directory.
		if d, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			return filepath.Join(d, filepath.Base(p))
		}
		return p
	}
	rel, err := filepath.Rel(abs(top), abs(path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// Clean reports whether the tree is known to have had no uncommitted changes.
func (c Commit) Clean() bool { return c.Hash != "" && c.Err == "" && len(c.Changed) == 0 }

// Describe says which commit was measured and whether its tree was dirty, with
// the hash cut to n characters (n <= 0: the full hash).
func (c Commit) Describe(n int) string {
	if c.Hash == "" {
		return "unknown (" + c.Err + ")"
	}
	h := c.Hash
	if n > 0 && len(h) > n {
		h = h[:n]
	}
	switch {
	case c.Err != "":
		return h + "; whether the tree had uncommitted changes is unknown (" + c.Err + ")"
	case len(c.Changed) == 0:
		return h + ", clean tree"
	}
	names := c.Changed
	more := ""
	if len(names) > maxChanged {
		names, more = names[:maxChanged], fmt.Sprintf(", and %d more", len(c.Changed)-maxChanged)
	}
	files := "files"
	if len(c.Changed) == 1 {
		files = "file"
	}
	return fmt.Sprintf("%s with uncommitted changes (**dirty tree**: %d %s: %s%s)", h, len(c.Changed), files, strings.Join(names, ", "), more)
}
