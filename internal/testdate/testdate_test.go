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
// two readings is as exact through testdate as through time.
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
		name := timeImport(f)
		if name == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == name {
				switch sel.Sel.Name {
				case "Now", "Since", "Until":
					bad = append(bad, fset.Position(sel.Pos()).String()+": time."+sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("tests read the machine's clock; use testdate.Now, Since and Until (internal/testdate):\n%s", strings.Join(bad, "\n"))
	}
}

// forTests says whether the file at path is test code: a _test.go file, or
// a file of a package that exists for tests (its directory ends in "test"),
// but for this package, which reads the machine's clock to move it.
func forTests(path string) bool {
	dir := filepath.Base(filepath.Dir(path))
	return dir != "testdate" && (strings.HasSuffix(path, "_test.go") || strings.HasSuffix(dir, "test"))
}

// timeImport is the name f imports package time as, or "".
func timeImport(f *ast.File) string {
	for _, imp := range f.Imports {
		if imp.Path.Value == `"time"` {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return "time"
		}
	}
	return ""
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
		if d := a.Sub(at); d < 0 || d > 10*time.Minute {
			t.Errorf("%s=%s, but testdate.Now is %v", testdate.Env, v, a)
		}
	}
	time.Sleep(10 * time.Millisecond)
	if d := testdate.Since(a); d < 10*time.Millisecond || d > time.Minute {
		t.Errorf("Since(Now()) after 10ms is %v", d)
	}
}
