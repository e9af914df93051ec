// Command correct is the Go half of internal/conformance/run.sh (make
// conformance): it copies the OJS conformance suite with its documented
// case defects corrected, and judges the two runs.
//
//	correct apply -suite DIR -out DIR [-list FILE] [-corrections FILE]
//	    copy the suite directory (the one holding its run.sh) to DIR, the
//	    cases of the corrections file corrected; DIR/corrected.txt lists
//	    them (those on -list, when given)
//	correct check -suite DIR -list FILE -official OUT -corrected OUT [-corrections FILE]
//	    read what the suite's run.sh printed for the cases of -list (the
//	    suite as published) and for the corrected copy: exit 0 when the
//	    failing cases are exactly the documented defects among them and
//	    every corrected case passes
//
// Both exit 1, saying why, on any mismatch or when a correction no longer
// applies to its case.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/redrive/redrive/internal/conformance"
)

const defaultCorrections = "internal/conformance/corrections.json"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "apply":
		err = apply(os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "correct:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: correct apply -suite DIR -out DIR [-list FILE] [-corrections FILE]\n"+
		"       correct check -suite DIR -list FILE -official OUT -corrected OUT [-corrections FILE]")
	os.Exit(2)
}

func apply(args []string) error {
	fs := flag.NewFlagSet("apply", flag.ExitOnError)
	suite := fs.String("suite", "", "the suite directory (holding its run.sh)")
	out := fs.String("out", "", "where to write the corrected copy (must not exist)")
	list := fs.String("list", "", "list only the corrected cases on this list in corrected.txt")
	path := fs.String("corrections", defaultCorrections, "the corrections file")
	_ = fs.Parse(args)
	if *suite == "" || *out == "" {
		usage()
	}
	c, err := conformance.Load(*path)
	if err != nil {
		return err
	}
	var only []string
	if *list != "" {
		if only, err = conformance.ReadList(*list); err != nil {
			return err
		}
	}
	return c.Apply(*suite, *out, only)
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	suite := fs.String("suite", "", "the suite directory (holding its run.sh)")
	list := fs.String("list", "", "the cases the official run ran (such as the suite's target.txt)")
	official := fs.String("official", "", "what the suite's run.sh printed for -list")
	corrected := fs.String("corrected", "", "what it printed for the corrected copy")
	path := fs.String("corrections", defaultCorrections, "the corrections file")
	_ = fs.Parse(args)
	if *suite == "" || *list == "" || *official == "" || *corrected == "" {
		usage()
	}
	c, err := conformance.Load(*path)
	if err != nil {
		return err
	}
	files, err := conformance.ReadList(*list)
	if err != nil {
		return err
	}
	off, err := parse(*suite, files, *official)
	if err != nil {
		return fmt.Errorf("official run: %w", err)
	}
	documented := c.Files(files)
	cor, err := parse(*suite, documented, *corrected)
	if err != nil {
		return fmt.Errorf("corrected run: %w", err)
	}
	summary, problems := conformance.Verdict(documented, filepath.ToSlash(*path), off, cor)
	for _, p := range problems {
		fmt.Println("  " + p)
	}
	fmt.Println(summary)
	if len(problems) > 0 {
		return fmt.Errorf("%d problems (above)", len(problems))
	}
	return nil
}

// parse reads a run's output; the corrected cases keep their test id and
// name, so the original suite indexes them too.
func parse(suite string, files []string, output string) (*conformance.Run, error) {
	idx, err := conformance.IndexCases(suite, files)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(output)
	if err != nil {
		return nil, fmt.Errorf("read run output: %w", err)
	}
	defer f.Close()
	return conformance.ParseRun(f, idx)
}
