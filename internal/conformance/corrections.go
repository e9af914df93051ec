// Package conformance runs the official OJS conformance suite
// (openjobspec/ojs-conformance) against Redrive honestly: the suite as
// published, where the cases whose own text contradicts the OJS spec (or
// that its runner cannot evaluate) are expected to fail, each one
// documented in corrections.json with the spec sentence that shows the case
// wrong; and a corrected copy of those cases, which must pass.
//
// The suite is not part of this repository. internal/conformance/run.sh
// (make conformance OJS_SUITE=dir) drives it; cmd/correct applies the
// corrections to a copy of the suite and checks the two runs' results.
package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// SuitesDir is where, under a suite directory (the one holding the suite's
// run.sh), the case files are: case paths are relative to it.
const SuitesDir = "ojs-conformance/suites"

// CorrectedList is the file Apply writes into its copy: the corrected case
// paths, one a line, a list for the suite's run.sh.
const CorrectedList = "corrected.txt"

// Corrections is corrections.json: the catalog of defect kinds and the
// defective cases with their edits.
type Corrections struct {
	// About says what the file is, for a human reader.
	About string `json:"about"`
	// Suite names the suite version the corrections were written against.
	Suite string `json:"suite"`
	// Defects are the kinds of case defect, by id.
	Defects map[string]Defect `json:"defects"`
	// Cases are the defective cases; each fails on an implementation that
	// follows the spec text, and passes once its edits are applied.
	Cases []Case `json:"cases"`
}

// Defect is one kind of case defect.
type Defect struct {
	Title string `json:"title"`
	// Why says why no server following the spec text passes such a case.
	Why string `json:"why"`
	// Evidence are the spec (or runner) sentences that show it, quoted.
	Evidence []Evidence `json:"evidence"`
}

// Evidence is a quoted sentence and where it stands.
type Evidence struct {
	// Source is the document and section, or the runner's file and function.
	Source string `json:"source"`
	Quote  string `json:"quote"`
}

// Case is a defective case of the suite.
type Case struct {
	// File is the case's path relative to SuitesDir.
	File string `json:"file"`
	// TestID is the case's test_id (not unique in the suite: File is the key).
	TestID string `json:"test_id"`
	Edits  []Edit `json:"edits"`
}

// Edit corrects one defect of a case.
type Edit struct {
	// Defect is the id of the defect kind in Corrections.Defects.
	Defect string `json:"defect"`
	// What says what is wrong in this case and what the edit changes.
	What string `json:"what"`
	// Patch is an RFC 6902 JSON Patch of the case file. It tests every
	// value it replaces, removes or moves first, so that it fails, rather
	// than edits a case it was not written for, when the case changed
	// upstream.
	Patch json.RawMessage `json:"patch"`
}

// Load reads and checks a corrections file.
func Load(path string) (*Corrections, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read corrections: %w", err)
	}
	var c Corrections
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// check verifies the catalog is consistent: every edit names a known defect
// kind and tests what it changes; every kind has evidence; a file is listed
// once.
func (c *Corrections) check() error {
	for id, d := range c.Defects {
		if d.Title == "" || d.Why == "" || len(d.Evidence) == 0 {
			return fmt.Errorf("defect %q: needs a title, a why and evidence", id)
		}
		for i, e := range d.Evidence {
			if e.Source == "" || e.Quote == "" {
				return fmt.Errorf("defect %q: evidence[%d]: needs a source and a quote", id, i)
			}
		}
	}
	seen := map[string]bool{}
	for _, cs := range c.Cases {
		if cs.File == "" || cs.TestID == "" || len(cs.Edits) == 0 {
			return fmt.Errorf("case %q: needs a file, a test_id and edits", cs.File)
		}
		if seen[cs.File] {
			return fmt.Errorf("case %s is listed twice", cs.File)
		}
		seen[cs.File] = true
		for i, e := range cs.Edits {
			if _, ok := c.Defects[e.Defect]; !ok {
				return fmt.Errorf("%s: edit %d: unknown defect %q", cs.File, i, e.Defect)
			}
			if e.What == "" {
				return fmt.Errorf("%s: edit %d: needs a what", cs.File, i)
			}
			if err := checkPatch(e.Patch); err != nil {
				return fmt.Errorf("%s: edit %d (%s): %w", cs.File, i, e.Defect, err)
			}
		}
	}
	return nil
}

// op is one operation of a JSON Patch.
type op struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// checkPatch requires a test of every path a replace or remove changes and
// every from a move takes, before it, and at least one test in a patch that
// only adds: an edit must fail when the case is not the one it was written
// for.
func checkPatch(raw json.RawMessage) error {
	var ops []op
	if err := json.Unmarshal(raw, &ops); err != nil || len(ops) == 0 {
		return errors.New("patch: must be a non-empty array of RFC 6902 operations")
	}
	if _, err := jsonpatch.DecodePatch(raw); err != nil {
		return fmt.Errorf("patch: %w", err)
	}
	tested := map[string]bool{}
	for i, o := range ops {
		switch o.Op {
		case "test":
			tested[o.Path] = true
		case "replace", "remove":
			if !tested[o.Path] {
				return fmt.Errorf("patch op %d: %s %s without a test of that path before it", i, o.Op, o.Path)
			}
		case "move":
			if !tested[o.From] {
				return fmt.Errorf("patch op %d: move from %s without a test of that path before it", i, o.From)
			}
		case "add":
			if len(tested) == 0 {
				return fmt.Errorf("patch op %d: add %s without any test before it", i, o.Path)
			}
		default:
			return fmt.Errorf("patch op %d: op %q: use test, add, remove, replace or move", i, o.Op)
		}
	}
	return nil
}

// Files are the documented defective cases' paths, sorted: all of them when
// only is nil, else those on it.
func (c *Corrections) Files(only []string) []string {
	var out []string
	for _, cs := range c.Cases {
		if only == nil || slices.Contains(only, cs.File) {
			out = append(out, cs.File)
		}
	}
	slices.Sort(out)
	return out
}

// Apply copies the suite directory (the one holding the suite's run.sh, its
// runner and ../ojs-proto as the runner's go.mod replaces it) into out,
// which must not exist, rewrites every listed case there with its edits and
// writes out/corrected.txt, the corrected cases' list for the suite's
// run.sh (only those on only, unless it is nil). It fails, naming the case
// and the operation, when an edit no longer applies: the case changed
// upstream.
func (c *Corrections) Apply(suite, out string, only []string) error {
	if _, err := os.Stat(filepath.Join(suite, SuitesDir)); err != nil {
		return fmt.Errorf("%s is not an OJS conformance suite directory (no %s): %w", suite, SuitesDir, err)
	}
	if err := copyTree(suite, out); err != nil {
		return fmt.Errorf("copy the suite: %w", err)
	}
	for _, cs := range c.Cases {
		path := filepath.Join(out, SuitesDir, filepath.FromSlash(cs.File))
		doc, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("case %s (%s): %w", cs.File, cs.TestID, err)
		}
		fixed, err := correct(doc, cs)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, fixed, 0o644); err != nil {
			return fmt.Errorf("write corrected %s: %w", cs.File, err)
		}
	}
	var names strings.Builder
	for _, f := range c.Files(only) {
		names.WriteString(f + "\n")
	}
	if err := os.WriteFile(filepath.Join(out, CorrectedList), []byte(names.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", CorrectedList, err)
	}
	return nil
}

// correct applies a case's edits, one operation at a time so that a failure
// names the operation.
func correct(doc []byte, cs Case) ([]byte, error) {
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = false
	opts.EscapeHTML = false
	for i, e := range cs.Edits {
		var ops []json.RawMessage
		if err := json.Unmarshal(e.Patch, &ops); err != nil {
			return nil, fmt.Errorf("case %s (%s): edit %d: %w", cs.File, cs.TestID, i, err)
		}
		for j, raw := range ops {
			p, err := jsonpatch.DecodePatch([]byte("[" + string(raw) + "]"))
			if err != nil {
				return nil, fmt.Errorf("case %s (%s): edit %d op %d: %w", cs.File, cs.TestID, i, j, err)
			}
			next, err := p.ApplyWithOptions(doc, opts)
			if err != nil {
				return nil, fmt.Errorf("case %s (%s) changed upstream: edit %d (%s) op %d %s no longer applies: %v; "+
					"check the case against the spec again and update internal/conformance/corrections.json",
					cs.File, cs.TestID, i, e.Defect, j, raw, err)
			}
			doc = next
		}
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, doc, "", "  "); err != nil {
		return nil, fmt.Errorf("case %s: corrected case is not JSON: %w", cs.File, err)
	}
	pretty.WriteByte('\n')
	return pretty.Bytes(), nil
}

// copyTree copies the regular files and directories under src to dst,
// writable (the suite may be read-only; the runner's build may write
// go.sum). A symbolic link to a file is copied as that file.
func copyTree(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("%s exists", dst)
	}
	return filepath.WalkDir(src, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		return os.WriteFile(target, b, mode)
	})
}
