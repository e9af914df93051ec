package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Run is what the suite's run.sh printed for one list of cases.
type Run struct {
	// Total and Passed are from its last line, "ojs-conformance: P/T cases pass".
	Total, Passed int
	// Failed are the failing cases' files, sorted, each with the runner's
	// lines about it (its failing steps).
	Failed []string
	Why    map[string][]string
}

// The suite's run.sh prints a failing case as the runner's table row,
// "  TEST-ID  name  FAIL  12ms" (the name cut to 37 characters and "..."
// past 40), followed by "    -> [step-id] message" lines, and ends with
// "ojs-conformance: P/T cases pass".
var (
	rowLine     = regexp.MustCompile(`^  (\S+)\s+(.+?)\s+(FAIL|ERR|ERROR|SKIP)\s+\d+ms$`)
	summaryLine = regexp.MustCompile(`^ojs-conformance: (\d+)/(\d+) cases pass$`)
)

// shownName is a case's name as the runner's table shows it.
func shownName(name string) string {
	if len(name) > 40 {
		return name[:37] + "..."
	}
	return name
}

// CaseIndex maps the runner's table rows (test id and shown name) to case
// files: the suite's test ids are not unique.
type CaseIndex map[string]string

// IndexCases reads the listed cases (paths relative to SuitesDir) of a suite.
func IndexCases(suite string, files []string) (CaseIndex, error) {
	idx := CaseIndex{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(suite, SuitesDir, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("read case: %w", err)
		}
		var tc struct {
			TestID string `json:"test_id"`
			Name   string `json:"name"`
		}
		if err := json.Unmarshal(b, &tc); err != nil {
			return nil, fmt.Errorf("case %s: %w", f, err)
		}
		key := tc.TestID + " " + shownName(tc.Name)
		if other, dup := idx[key]; dup {
			return nil, fmt.Errorf("cases %s and %s show the same row (%s): their results cannot be told apart", other, f, key)
		}
		idx[key] = f
	}
	return idx, nil
}

// ReadList reads a list of case paths, one a line (blank lines skipped).
func ReadList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read case list: %w", err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// ParseRun reads the output of the suite's run.sh for the indexed cases.
// Every failing row must be one of them, and the rows must account for
// every case the summary says did not pass.
func ParseRun(r io.Reader, idx CaseIndex) (*Run, error) {
	run := &Run{Why: map[string][]string{}}
	var last, summary string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := rowLine.FindStringSubmatch(line); m != nil {
			f, ok := idx[m[1]+" "+m[2]]
			if !ok {
				return nil, fmt.Errorf("a failing row names no listed case: %q", line)
			}
			run.Failed = append(run.Failed, f)
			last = f
			continue
		}
		if strings.HasPrefix(line, "    -> ") && last != "" {
			run.Why[last] = append(run.Why[last], strings.TrimPrefix(line, "    -> "))
			continue
		}
		if m := summaryLine.FindStringSubmatch(line); m != nil {
			summary = line
			run.Passed, _ = strconv.Atoi(m[1])
			run.Total, _ = strconv.Atoi(m[2])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read run output: %w", err)
	}
	if summary == "" {
		return nil, fmt.Errorf("the run printed no %q line: the runner did not run", "ojs-conformance: P/T cases pass")
	}
	if run.Total != len(idx) {
		return nil, fmt.Errorf("%s, but %d cases were listed", summary, len(idx))
	}
	slices.Sort(run.Failed)
	if run.Failed = slices.Compact(run.Failed); len(run.Failed) != run.Total-run.Passed {
		return nil, fmt.Errorf("%s, but %d failing rows were printed", summary, len(run.Failed))
	}
	return run, nil
}

// Verdict compares the official run (the suite as published) with the
// documented defective cases among the cases it ran, and checks the
// corrected run (those cases corrected). It returns the summary line, and the problems: a case that
// fails and is not documented, a documented case that passes (the list must
// stay true), a corrected case that fails.
func Verdict(documented []string, correctionsPath string, official, corrected *Run) (string, []string) {
	var problems []string
	for _, f := range official.Failed {
		if !slices.Contains(documented, f) {
			problems = append(problems, fmt.Sprintf("%s fails and is not a documented case defect:\n      %s",
				f, strings.Join(official.Why[f], "\n      ")))
		}
	}
	for _, f := range documented {
		if !slices.Contains(official.Failed, f) {
			problems = append(problems, fmt.Sprintf("%s is documented as defective in %s but passes as published: "+
				"check it again and remove it from the corrections", f, correctionsPath))
		}
	}
	for _, f := range corrected.Failed {
		problems = append(problems, fmt.Sprintf("%s fails even corrected:\n      %s", f, strings.Join(corrected.Why[f], "\n      ")))
	}
	if corrected.Total != len(documented) {
		problems = append(problems, fmt.Sprintf("the corrected run ran %d cases, not the %d corrected ones", corrected.Total, len(documented)))
	}
	summary := fmt.Sprintf("official: %d/%d pass; the %d failing are the documented case defects (%s); corrected: %d/%d pass",
		official.Passed, official.Total, len(official.Failed), correctionsPath, corrected.Passed, corrected.Total)
	if len(problems) > 0 {
		summary = fmt.Sprintf("official: %d/%d pass, %d failing, %d documented case defects (%s); corrected: %d/%d pass",
			official.Passed, official.Total, len(official.Failed), len(documented), correctionsPath, corrected.Passed, corrected.Total)
	}
	return summary, problems
}
