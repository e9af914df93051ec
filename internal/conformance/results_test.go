package conformance

import (
	"slices"
	"strings"
	"testing"
)

// Output as the suite's run.sh prints it: the runner's failing rows (name
// cut past 40 characters), their step lines, the level table's header (its
// grep catches it), the summary.
const officialOutput = `  T-001          ack                                      FAIL     53ms
    -> [step-2] Assertion failed at "$.id": expected string "x", got <nil>: <nil>
  T-002          a-case-whose-name-is-longer-than-fort... FAIL     3ms
    -> [step-1] Expected status 200, got 404
  LEVEL    NAME             TOTAL   PASS   FAIL   SKIP   STATUS
ojs-conformance: 1/3 cases pass
`

func fixtureIndex(t *testing.T, files ...string) CaseIndex {
	t.Helper()
	if files == nil {
		var err error
		if files, err = ReadList(fixtureSuite + "/target.txt"); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := IndexCases(fixtureSuite, files)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// TestParseRunAttributesEveryFailingRowToItsFile: test ids repeat in the
// suite (T-001 twice here), so a row is the test id and the shown name.
func TestParseRunAttributesEveryFailingRowToItsFile(t *testing.T) {
	run, err := ParseRun(strings.NewReader(officialOutput), fixtureIndex(t))
	if err != nil {
		t.Fatal(err)
	}
	if run.Total != 3 || run.Passed != 1 || !slices.Equal(run.Failed, []string{"level-0/ack.json", "level-0/long.json"}) {
		t.Errorf("run = %+v", run)
	}
	if why := run.Why["level-0/long.json"]; len(why) != 1 || why[0] != "[step-1] Expected status 200, got 404" {
		t.Errorf("why long.json = %q", why)
	}

	for name, tc := range map[string]struct{ out, want string }{
		"no summary": {"runner build failed: go: no network\n", "printed no"},
		"rows short of the summary": {"  T-001          ack                                      FAIL     53ms\nojs-conformance: 1/3 cases pass\n",
			"but 1 failing rows"},
		"unknown row": {"  T-404          nobody                                   FAIL     1ms\nojs-conformance: 2/3 cases pass\n",
			"names no listed case"},
		"another list": {"ojs-conformance: 2/2 cases pass\n", "but 3 cases were listed"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRun(strings.NewReader(tc.out), fixtureIndex(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestIndexCasesRefusesRowsThatCannotBeToldApart(t *testing.T) {
	_, err := IndexCases(fixtureSuite, []string{"level-0/ack.json", "level-0/ack.json"})
	if err == nil || !strings.Contains(err.Error(), "cannot be told apart") {
		t.Errorf("err %v", err)
	}
}

// TestVerdictRequiresExactlyTheDocumentedFailures: the official run must
// fail exactly on the documented cases (a new failure fails, a documented
// case passing fails), the corrected run must pass them all.
func TestVerdictRequiresExactlyTheDocumentedFailures(t *testing.T) {
	official, err := ParseRun(strings.NewReader(officialOutput), fixtureIndex(t))
	if err != nil {
		t.Fatal(err)
	}
	documented := []string{"level-0/ack.json", "level-0/long.json"}
	allPass, err := ParseRun(strings.NewReader("ojs-conformance: 2/2 cases pass\n"), fixtureIndex(t, documented...))
	if err != nil {
		t.Fatal(err)
	}

	summary, problems := Verdict(documented, "c.json", official, allPass)
	if len(problems) != 0 {
		t.Errorf("problems %q", problems)
	}
	if want := "official: 1/3 pass; the 2 failing are the documented case defects (c.json); corrected: 2/2 pass"; summary != want {
		t.Errorf("summary\n %q, want\n %q", summary, want)
	}

	// long.json fails and is not documented: it is a problem, with its step.
	_, problems = Verdict([]string{"level-0/ack.json"}, "c.json", official, allPass)
	if !slices.ContainsFunc(problems, func(p string) bool {
		return strings.Contains(p, "level-0/long.json fails and is not a documented") && strings.Contains(p, "Expected status 200, got 404")
	}) {
		t.Errorf("problems %q, want long.json's undocumented failure", problems)
	}

	// ack-again.json is documented but passes: the list must stay true.
	_, problems = Verdict(append([]string{"level-0/ack-again.json"}, documented...), "c.json", official, allPass)
	if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "level-0/ack-again.json is documented as defective") }) {
		t.Errorf("problems %q, want ack-again.json's unexpected pass", problems)
	}

	// A corrected case failing is a problem.
	oneFails, err := ParseRun(strings.NewReader("  T-001          ack                                      FAIL     9ms\n"+
		"    -> [step-2] Expected status 200, got 409\nojs-conformance: 1/2 cases pass\n"), fixtureIndex(t, documented...))
	if err != nil {
		t.Fatal(err)
	}
	summary, problems = Verdict(documented, "c.json", official, oneFails)
	if !slices.ContainsFunc(problems, func(p string) bool {
		return strings.Contains(p, "level-0/ack.json fails even corrected") && strings.Contains(p, "got 409")
	}) || !strings.Contains(summary, "corrected: 1/2 pass") {
		t.Errorf("summary %q problems %q, want ack.json failing corrected", summary, problems)
	}
}
