// Command render rebuilds the matrix's Markdown, results/matrix.md and the
// README's section between the matrix markers, from results/matrix.csv, without
// measuring anything: after a change to the report's layout or to the facts
// (facts.go), `make render` (from benchmarks/) shows the last run in it.
//
//	go run ./cmd/render [-csv results/matrix.csv] [-out results] [-readme ../README.md]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/distlock/distlock/benchmarks"
)

func main() {
	csvPath := flag.String("csv", "results/matrix.csv", "the matrix run to render")
	out := flag.String("out", "", "directory for matrix.md (default: the CSV's directory)")
	readme := flag.String("readme", "../README.md", "README whose matrix section is rewritten (empty: none)")
	flag.Parse()
	if err := run(*csvPath, *out, *readme); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run(csvPath, out, readme string) error {
	if out == "" {
		out = filepath.Dir(csvPath)
	}
	f, err := os.Open(csvPath)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := benchmarks.ReadCSV(f)
	if err != nil {
		return err
	}
	return rep.Render(out, readme)
}
