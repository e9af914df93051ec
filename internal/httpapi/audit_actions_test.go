package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/queue"
)

// AuditedActions is every action that writes audit entries, found where
// they are written: the actions of the routes the server serves (the audit
// middleware writes an entry for each call of one), and the action of every
// other AddAudit call in the module's source (an entry written outside a
// call, such as records.Service.StartQuiet's). t fails on an AddAudit call
// whose action is not a string literal the scan can read, other than the
// middleware's and the wrappers that pass an entry on.
func AuditedActions(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range New(Config{Queues: &queue.Resolver{}}).routes {
		if r.action != "" {
			seen[r.action] = true
		}
	}
	for _, a := range addAuditActions(t) {
		seen[a] = true
	}
	return slices.Sorted(func(yield func(string) bool) {
		for a := range seen {
			if !yield(a) {
				return
			}
		}
	})
}

// addAuditActions reads the actions of the AddAudit calls in the module's
// non-test Go files.
func addAuditActions(t *testing.T) []string {
	t.Helper()
	root := moduleRoot(t)
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(src), "AddAudit(") {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "AddAudit" {
					return true
				}
				action, ok := literalAction(call)
				switch {
				case ok:
					out = append(out, action)
				case fn.Name.Name == "AddAudit":
					// A wrapper passing its caller's entry on.
				case filepath.ToSlash(rel) == "internal/httpapi/audit.go" && fn.Name.Name == "audit":
					// The middleware: the route table's actions.
				default:
					t.Errorf("%s: an AddAudit call whose action is not a string literal: name it in an AuditEntry literal "+
						"(Action: \"…\") so that the audit masking test finds it", fset.Position(call.Pos()))
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// literalAction is the Action of the AuditEntry literal among call's
// arguments.
func literalAction(call *ast.CallExpr) (string, bool) {
	for _, arg := range call.Args {
		if u, ok := arg.(*ast.UnaryExpr); ok && u.Op == token.AND {
			arg = u.X
		}
		lit, ok := arg.(*ast.CompositeLit)
		if !ok {
			continue
		}
		for _, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Action" {
				if v, ok := kv.Value.(*ast.BasicLit); ok && v.Kind == token.STRING {
					s, err := strconv.Unquote(v.Value)
					return s, err == nil
				}
			}
		}
	}
	return "", false
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Every audited action says what its entries' documents hold, so that a
// caller without unmask sees them masked as the records are (auditShapes);
// an action missing there is shown masked whole.
func TestEveryAuditedActionHasAMaskingShape(t *testing.T) {
	actions := AuditedActions(t)
	for _, a := range actions {
		if _, ok := auditShapes[a]; !ok {
			t.Errorf("audited action %s is not in auditShapes: say where record data lies in its filter, before and after", a)
		}
	}
	for a := range auditShapes {
		if !slices.Contains(actions, a) {
			t.Errorf("auditShapes lists %s, which nothing audits", a)
		}
	}
}
