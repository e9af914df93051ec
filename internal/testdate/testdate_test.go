package testdate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/testdate"
)

// The whole class of "a test that passes only on some days": no test reads
// the machine's clock. Every test file, and every package that exists for
// tests (pgtest, apptest, kafkatest, ...), takes "now" from testdate, so
// that `make test-dates` moves every date a test makes. A duration between
// two readings is as exact through testdate as through time. Time-ordered
// UUIDs carry the clock too (a record's id picks its weekly partition):
// tests make them with dlq.NewID(testdate.Now()).
func TestNoTestReadsTheMachinesClock(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root {
			if name := d.Name(); strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || path == filepath.Join(root, "internal", "bench", "riverpeer") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || !forTests(path) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		names := clockImports(f)
		if len(names) == 0 {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && names[x.Name] != "" && readsClock[names[x.Name]][sel.Sel.Name] {
				bad = append(bad, fset.Position(sel.Pos()).String()+": "+names[x.Name]+"."+sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("tests read the machine's clock; use testdate.Now, Since and Until (internal/testdate), and dlq.NewID(testdate.Now()) for a time-ordered id:\n%s", strings.Join(bad, "\n"))
	}
}

// forTests says whether the file at path is test code: a _test.go file, or
// a file of a package that exists for tests (its directory ends in "test"),
// but for this package, which reads the machine's clock to move it.
func forTests(path string) bool {
	dir := filepath.Base(filepath.Dir(path))
	return dir != "testdate" && (strings.HasSuffix(path, "_test.go") || strings.HasSuffix(dir, "test"))
}

// readsClock are, by import path, the functions that read the machine's
// clock.
var readsClock = map[string]map[string]bool{
	"time":                   {"Now": true, "Since": true, "Until": true},
	"github.com/google/uuid": {"NewV7": true, "NewV6": true, "NewUUID": true},
}

// clockImports maps the names f imports readsClock's packages as to their
// import paths.
func clockImports(f *ast.File) map[string]string {
	names := map[string]string{}
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		if readsClock[path] == nil {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = path
	}
	return names
}

// Now runs on from the moved time, and clock.Wall with it.
func TestNowIsTheMovedTime(t *testing.T) {
	t.Parallel()
	a, w := testdate.Now(), clock.Wall.Now()
	if d := w.Sub(a); d < 0 || d > time.Second {
		t.Errorf("clock.Wall is %v from testdate.Now", d)
	}
	if v := os.Getenv(testdate.Env); v != "" {
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t.Fatal(err)
		}
		if d := a.Sub(at); d < -time.Second || d > 10*time.Minute { // the offset is whole seconds
			t.Errorf("%s=%s, but testdate.Now is %v", testdate.Env, v, a)
		}
	}
	// Since runs on the same clock: read after b, it is at least b - a.
	b := testdate.Now()
	if d := testdate.Since(a); d < b.Sub(a) || d > time.Minute {
		t.Errorf("Since(a) is %v, read after Now() was %v past a", d, b.Sub(a))
	}
}
