package filter_test

import (
	"go/build"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/filter"
)

// docs/api.md's Filters table lists the key table's keys, in its order, with
// the sources that take each.
func TestAPIDocListsTheKeyTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n### Filters\n")
	if !ok {
		t.Fatal("docs/api.md has no Filters section")
	}
	var names []string
	sources := map[string]filter.Source{}
	name := regexp.MustCompile("`([a-z_]+)`")
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "### ") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		var src filter.Source
		for i, s := range []filter.Source{filter.List, filter.Bulk, filter.Rule} {
			if strings.TrimSpace(cells[2+i]) == "✓" {
				src |= s
			}
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, m[1])
			sources[m[1]] = src
		}
	}
	if want := filter.Names(0); !slices.Equal(names, want) {
		t.Errorf("docs/api.md's Filters table lists\n%q\nwant the key table\n%q", names, want)
	}
	for _, k := range filter.Keys(0) {
		if sources[k.Name] != k.Sources {
			t.Errorf("docs/api.md: %s is taken by %v, the table says %v", k.Name, sources[k.Name].Names(), k.Sources.Names())
		}
	}
}

// The package imports the standard library and dlq, nothing else: no Kafka,
// Postgres or HTTP framework (its package doc says so).
func TestImportsOnlyDLQ(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.Contains(strings.Split(imp, "/")[0], ".") && imp != "github.com/redrive/redrive/internal/dlq" {
			t.Errorf("filter imports %s", imp)
		}
	}
}
