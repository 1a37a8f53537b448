package benchmarks

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// WriteFiles writes matrix.csv into dir, then what Render writes.
func (rep *Report) WriteFiles(dir, readme string) error {
	csvb, err := rep.CSV()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "matrix.csv"), csvb, 0o644); err != nil {
		return err
	}
	return rep.Render(dir, readme)
}

// Render writes matrix.md into dir and, when readme is not empty, rewrites the
// README's section between the markers with the compact report, whose links
// point into dir.
func (rep *Report) Render(dir, readme string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "matrix.md"), []byte(rep.Full()), 0o644); err != nil {
		return err
	}
	if readme == "" {
		return nil
	}
	link, err := relLink(filepath.Dir(readme), dir)
	if err != nil {
		return err
	}
	return RewriteSection(readme, rep.Compact(link))
}

// relLink is the relative link from the directory from to the directory to.
func relLink(from, to string) (string, error) {
	a, err := filepath.Abs(from)
	if err != nil {
		return "", err
	}
	b, err := filepath.Abs(to)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(a, b)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// RewriteSection replaces what lies between BeginMarker and EndMarker in the file
// at path with body, and leaves the rest of the file as it is.
func RewriteSection(path, body string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i := strings.Index(s, BeginMarker)
	j := strings.Index(s, EndMarker)
	if i < 0 || j < i {
		return errors.New(path + ": no " + BeginMarker + " ... " + EndMarker + " section")
	}
	out := s[:i+len(BeginMarker)] + "\n" + strings.TrimSpace(body) + "\n" + s[j:]
	return os.WriteFile(path, []byte(out), 0o644)
}
