package store

import (
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// A value for every filter key, as a query string gives it.
var predicateSamples = url.Values{
	"queue": {"orders"}, "type": {"order.created"}, "error_type": {"db.timeout"}, "state": {"discarded"},
	"exhaustion": {"dead_letter"}, "since": {"2026-02-13T11:00:00Z"}, "until": {"2026-02-13T12:00:00Z"},
	"key": {"customer-17"}, "q": {"card_declined"}, "path": {"customer.id"}, "value": {"17"},
	"header": {"tenant=acme", "region"}, "incident": {"e8bdf5bbe285de31"},
	"ids": {"01936f0e-7b2a-7000-8000-000000000001"}, "unacknowledged": {"true"},
}

// Every filter key and every Scope field has a predicate, and setting one
// sets exactly the predicates that answer for it: a key or field added
// without one cannot go unfiltered, nor be counted from the count table
// as if it were not there.
func TestEveryFilterKeyHasAPredicate(t *testing.T) {
	t.Parallel()
	answers := func(name string) []int {
		var out []int
		for i, p := range predicates {
			if slices.Contains(p.keys, name) {
				out = append(out, i)
			}
		}
		return out
	}
	on := func(f *filter.Filter, sc *filter.Scope) []int {
		var out []int
		for i, p := range predicates {
			if p.on(f, sc) {
				out = append(out, i)
			}
		}
		return out
	}
	for _, k := range filter.Keys(0) {
		want := answers(k.Name)
		if len(want) == 0 {
			t.Errorf("filter key %s has no predicate", k.Name)
			continue
		}
		vs, ok := predicateSamples[k.Name]
		if !ok {
			t.Errorf("filter key %s has no sample value here", k.Name)
			continue
		}
		q := url.Values{k.Name: vs}
		switch k.Name { // path and value go together
		case "path":
			q.Set("value", "17")
		case "value":
			q.Set("path", "customer.id")
		}
		f, err := filter.ParseQuery(q, 0)
		if k.Name == "ids" { // not a query string key
			f, err = filter.ParseJSON([]byte(`{"ids":["`+vs[0]+`"]}`), filter.Bulk, "filter")
		}
		if err != nil {
			t.Fatalf("parse %s: %v", k.Name, err)
		}
		if got := on(&f, &filter.Scope{}); !reflect.DeepEqual(got, want) {
			t.Errorf("filter key %s sets predicates %v, want %v", k.Name, got, want)
		}
	}
	yes := true
	sample := filter.Scope{States: []dlq.State{dlq.StateDiscarded}, MaxID: "01936f0e-7b2a-7000-8000-000000000001",
		NotQueues: []string{"redrive.events"}, NotInternal: true, NotErrorTypes: []string{"filtered"}, InFlight: &yes,
		QueueGlobs: []string{"payments.*"}, OnlyQueues: []string{"orders"}}
	st := reflect.TypeOf(sample)
	for i := range st.NumField() {
		name := st.Field(i).Name
		want := answers(name)
		if len(want) == 0 {
			t.Errorf("Scope.%s has no predicate", name)
			continue
		}
		var sc filter.Scope
		v := reflect.ValueOf(&sc).Elem().Field(i)
		v.Set(reflect.ValueOf(sample).Field(i))
		if v.IsZero() {
			t.Fatalf("the sample sets no Scope.%s", name)
		}
		if got := on(&filter.Filter{}, &sc); !reflect.DeepEqual(got, want) {
			t.Errorf("Scope.%s sets predicates %v, want %v", name, got, want)
		}
	}
}

// A filter with every key and scope renders one named argument per value,
// twice in one statement under two prefixes without a clash, and no
// positional placeholder.
func TestWhereNamesEveryArgument(t *testing.T) {
	t.Parallel()
	f, err := filter.ParseQuery(predicateSamples, filter.List)
	if err != nil {
		t.Fatal(err)
	}
	f.IDs = []string{"01936f0e-7b2a-7000-8000-000000000001"}
	no := false
	sc := &filter.Scope{States: []dlq.State{dlq.StateDiscarded}, MaxID: "x", NotQueues: []string{"a"}, NotInternal: true,
		NotErrorTypes: []string{"filtered"}, InFlight: &no, QueueGlobs: []string{"pay_*"}}
	args := pgx.NamedArgs{}
	a, b := where(&f, sc, "a_", args), where(&f, sc, "b_", args)
	if strings.Contains(a+b, "$") {
		t.Errorf("positional placeholder in %s", a)
	}
	for name := range args {
		if !strings.Contains(a+b, "@"+name) {
			t.Errorf("argument %s is bound but not used", name)
		}
	}
	if countable(&f, sc) || !countable(&filter.Filter{Queue: "q", State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter},
		&filter.Scope{States: sc.States, NotQueues: sc.NotQueues, NotInternal: true, NotErrorTypes: sc.NotErrorTypes}) {
		t.Error("countable is wrong")
	}
}

// Queue globs become LIKE patterns with LIKE's own characters escaped: a
// topic name's '_' matches '_' only, as path.Match reads it.
func TestLikePatternsEscape(t *testing.T) {
	t.Parallel()
	got := LikePatterns([]string{"pay_*", "a?b", `x%\`})
	want := []string{`pay\_%`, "a_b", `x\%\\`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LikePatterns = %q, want %q", got, want)
	}
	if !inGlobs(nil, "any") || !inGlobs([]string{"pay_*"}, "pay_eu") || inGlobs([]string{"pay_*"}, "payXeu") || inGlobs([]string{}, "any") {
		t.Error("inGlobs is wrong")
	}
}
