package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const fixtureSuite = "testdata/suite"

// TestTheRepositorysCorrectionsAreConsistent loads corrections.json, the
// one make conformance uses: every edit names a known defect kind and tests
// what it changes (Load checks both), every kind is used, every case is a
// case path. (make conformance applies it to the suite itself, failing when
// an edit no longer applies.)
func TestTheRepositorysCorrectionsAreConsistent(t *testing.T) {
	c, err := Load("corrections.json")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, cs := range c.Cases {
		for _, e := range cs.Edits {
			used[e.Defect] = true
		}
		if !strings.HasSuffix(cs.File, ".json") || strings.HasPrefix(cs.File, "/") || strings.Contains(cs.File, "..") {
			t.Errorf("case %q: want a .json path relative to %s", cs.File, SuitesDir)
		}
	}
	for id := range c.Defects {
		if !used[id] {
			t.Errorf("defect %q is in the catalog but no case has it", id)
		}
	}
	if files := c.Files(nil); !slices.IsSorted(files) || len(files) != len(c.Cases) {
		t.Errorf("Files() = %v", files)
	}
}

// TestApplyCorrectsTheListedCasesInACopy: the copy holds the whole suite
// directory (run.sh, ../ojs-proto), the listed case edited, the others
// and the source untouched, and corrected.txt lists the corrected cases.
func TestApplyCorrectsTheListedCasesInACopy(t *testing.T) {
	c, err := Load("testdata/corrections.json")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(fixtureSuite, SuitesDir, "level-0/ack.json"))
	out := filepath.Join(t.TempDir(), "corrected")
	if err := c.Apply(fixtureSuite, out, nil); err != nil {
		t.Fatal(err)
	}

	var got struct {
		Steps []struct {
			Body       map[string]any `json:"body"`
			Assertions struct {
				Body map[string]any `json:"body"`
			} `json:"assertions"`
		} `json:"steps"`
	}
	b, err := os.ReadFile(filepath.Join(out, SuitesDir, "level-0/ack.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if typ := got.Steps[0].Body["type"]; typ != "test.bad_type" {
		t.Errorf("step-1 type = %v, want test.bad_type", typ)
	}
	ack := got.Steps[1].Assertions.Body
	if _, ok := ack["$.id"]; ok || ack["$.job_id"] != "{{steps.step-1.response.body.job.id}}" || ack["$.state"] != "completed" {
		t.Errorf("step-2 assertions = %v, want $.job_id moved from $.id, $.state kept", ack)
	}
	// Values the patch does not touch keep their text: 2.50 stays 2.50.
	if !strings.Contains(string(b), "2.50") {
		t.Errorf("corrected case lost the number's text 2.50:\n%s", b)
	}

	for _, f := range []string{"run.sh", "target.txt", "ojs-proto/README.md", SuitesDir + "/level-0/ack-again.json"} {
		want, _ := os.ReadFile(filepath.Join(fixtureSuite, f))
		have, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || string(have) != string(want) {
			t.Errorf("%s not copied as is (err %v)", f, err)
		}
	}
	if info, err := os.Stat(filepath.Join(out, "run.sh")); err != nil || info.Mode()&0o111 == 0 {
		t.Errorf("run.sh lost its executable bit: %v %v", info, err)
	}
	if list, _ := os.ReadFile(filepath.Join(out, CorrectedList)); string(list) != "level-0/ack.json\n" {
		t.Errorf("%s = %q, want the corrected case", CorrectedList, list)
	}
	if after, _ := os.ReadFile(filepath.Join(fixtureSuite, SuitesDir, "level-0/ack.json")); string(after) != string(before) {
		t.Error("Apply changed the source suite")
	}

	// With a list, corrected.txt names only the corrected cases on it.
	out2 := filepath.Join(t.TempDir(), "corrected")
	if err := c.Apply(fixtureSuite, out2, []string{"level-0/long.json"}); err != nil {
		t.Fatal(err)
	}
	if list, _ := os.ReadFile(filepath.Join(out2, CorrectedList)); string(list) != "" {
		t.Errorf("%s = %q, want empty: no corrected case is on the list", CorrectedList, list)
	}
}

// TestApplyFailsWhenACaseChangedUpstream: an edit whose test no longer
// holds stops Apply, naming the case and the operation, rather than
// editing a case it was not written for.
func TestApplyFailsWhenACaseChangedUpstream(t *testing.T) {
	suite := filepath.Join(t.TempDir(), "suite")
	if err := copyTree(fixtureSuite, suite); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(suite, SuitesDir, "level-0/ack.json")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "test.bad-type", "test.renamed-type", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load("testdata/corrections.json")
	if err != nil {
		t.Fatal(err)
	}
	err = c.Apply(suite, filepath.Join(t.TempDir(), "corrected"), nil)
	if err == nil {
		t.Fatal("Apply corrected a case that changed upstream")
	}
	for _, want := range []string{"level-0/ack.json", "T-001", "changed upstream", "/steps/0/body/type", "job-type-hyphen"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	// A case that is gone fails too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(suite, filepath.Join(t.TempDir(), "corrected"), nil); err == nil || !strings.Contains(err.Error(), "level-0/ack.json") {
		t.Errorf("Apply with the case gone: err %v, want one naming it", err)
	}
}

// TestLoadRejectsAnEditThatDoesNotTestWhatItChanges: a replace, remove or
// move must test its path first, an add-only patch must test something, and
// every edit must name a defect of the catalog.
func TestLoadRejectsAnEditThatDoesNotTestWhatItChanges(t *testing.T) {
	for name, tc := range map[string]struct{ patch, defect, want string }{
		"replace untested":        {`[{"op":"replace","path":"/a","value":1}]`, "d", "replace /a without a test"},
		"remove tested elsewhere": {`[{"op":"test","path":"/b","value":1},{"op":"remove","path":"/a"}]`, "d", "remove /a without a test"},
		"move untested":           {`[{"op":"move","from":"/a","path":"/b"}]`, "d", "move from /a without a test"},
		"add only":                {`[{"op":"add","path":"/a","value":1}]`, "d", "add /a without any test"},
		"copy":                    {`[{"op":"test","path":"/a","value":1},{"op":"copy","from":"/a","path":"/b"}]`, "d", `op "copy"`},
		"empty":                   {`[]`, "d", "non-empty array"},
		"unknown defect":          {`[{"op":"test","path":"/a","value":1}]`, "nope", `unknown defect "nope"`},
	} {
		t.Run(name, func(t *testing.T) {
			doc := `{"about":"x","suite":"x","defects":{"d":{"title":"t","why":"w","evidence":[{"source":"s","quote":"q"}]}},` +
				`"cases":[{"file":"a.json","test_id":"T","edits":[{"defect":"` + tc.defect + `","what":"w","patch":` + tc.patch + `}]}]}`
			path := filepath.Join(t.TempDir(), "corrections.json")
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: err %v, want one saying %q", err, tc.want)
			}
		})
	}
}
