package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/task"
)

// Every filter key survives the way from a query string to a task and back:
// the list takes it; the bulk body the CLI and console build from the query
// (the filter's Canonical) makes a task that stores it; the task, read back as
// a claim reads it (task.Selection), holds the same filter and selects with
// the same SQL. The same filter as a replay rule, through the API and in a
// policy file, reads back equal and selects with the same SQL too.
func TestEveryFilterKeySurvivesQueryToTaskAndRules(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	q := url.Values{
		"queue": {"orders"}, "type": {"order.created"}, "error_type": {"db.timeout"}, "state": {"discarded"},
		"exhaustion": {"dead_letter"}, "since": {"2026-02-13T11:00:00+01:00"}, "until": {"2026-02-13T12:00:00.5Z"},
		"key": {"customer-17"}, "q": {"card_declined"}, "path": {"customer.id"}, "value": {"17"},
		"header": {"tenant=acme", `a\:b:c=d`}, "incident": {"e8bdf5bbe285de31"}, "unacknowledged": {"false"},
	}
	ids := []string{"01936F0E-7B2A-7000-8000-000000000001", "01936f0e-7b2a-7000-8000-000000000002"}
	for _, name := range filter.Names(0) {
		if _, ok := q[name]; !ok && name != "ids" {
			t.Fatalf("the test gives no value for key %s", name)
		}
	}

	// The list takes every key, as filter.ParseQuery reads them.
	var l listJSON
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter?"+q.Encode(), &l), http.StatusOK)
	fromQuery, err := filter.ParseQuery(q, filter.List)
	if err != nil {
		t.Fatal(err)
	}

	// A bulk purge of that filter and picked ids, as the CLI sends it.
	bulkQ := url.Values{"ids": ids}
	for k, v := range q {
		bulkQ[k] = v
	}
	picked, err := filter.ParseQuery(bulkQ, filter.Bulk)
	if err != nil {
		t.Fatal(err)
	}
	var dry struct {
		Filter json.RawMessage `json:"filter"`
	}
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter", map[string]any{"filter": picked.Canonical()}, &dry), http.StatusOK)
	if string(dry.Filter) != string(picked.Canonical()) {
		t.Errorf("the dry run answers filter %s, want the canonical filter %s", dry.Filter, picked.Canonical())
	}
	var created struct {
		Task struct {
			ID     string          `json:"id"`
			Filter json.RawMessage `json:"filter"`
		} `json:"task"`
	}
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter", map[string]any{"filter": picked.Canonical(), "confirm": true}, &created),
		http.StatusAccepted)
	// Postgres keeps the stored filter as jsonb, in its own key order.
	if !sameJSON(created.Task.Filter, picked.Canonical()) {
		t.Errorf("task filter %s, want the canonical filter %s", created.Task.Filter, picked.Canonical())
	}
	stored, err := b.store.GetTask(ctx, created.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	resumed, _, err := task.Selection(stored, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(resumed, picked) {
		t.Errorf("the task reads back\n%#v\nwant\n%#v", resumed, picked)
	}
	if want := fromQuery; !reflect.DeepEqual(withoutIDs(resumed), want) {
		t.Errorf("the task's filter but its ids\n%#v\nwant the list's\n%#v", withoutIDs(resumed), want)
	}
	sameSQL(t, "task", &resumed, &picked)

	// A replay rule through the API.
	rule := map[string]any{"name": "every-key", "filter": fromQuery.Canonical(), "delay": "PT1H", "max_replays": 1}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/replay-rules", rule, nil), http.StatusCreated)
	sr, err := b.store.GetReplayRule(ctx, "every-key")
	if err != nil {
		t.Fatal(err)
	}
	apiRule, err := maintenance.RuleFromStore(sr)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(apiRule.Filter, fromQuery) {
		t.Errorf("the API rule reads back\n%#v\nwant\n%#v", apiRule.Filter, fromQuery)
	}
	sameSQL(t, "API replay rule", &apiRule.Filter, &fromQuery)

	// A replay rule in a policy file (JSON is YAML).
	file := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, file, fmt.Sprintf("replay_rules:\n  - {name: every-key, filter: %s, delay: PT1H, max_replays: 1}\n", fromQuery.Canonical()))
	set, err := policy.LoadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	fileRule := set.Resolve("orders", "").ReplayRules[0].Filter
	if !reflect.DeepEqual(fileRule, fromQuery) {
		t.Errorf("the policy file's rule reads back\n%#v\nwant\n%#v", fileRule, fromQuery)
	}
	sameSQL(t, "policy replay rule", &fileRule, &fromQuery)
}

func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func withoutIDs(f filter.Filter) filter.Filter {
	f.IDs = nil
	return f
}

// sameSQL fails unless got and want select with the same SQL and arguments.
func sameSQL(t *testing.T, what string, got, want *filter.Filter) {
	t.Helper()
	gotSQL, gotArgs := store.Where(got, nil)
	wantSQL, wantArgs := store.Where(want, nil)
	if gotSQL != wantSQL || !reflect.DeepEqual(gotArgs, wantArgs) {
		t.Errorf("%s selects with\n%s %v\nwant\n%s %v", what, gotSQL, gotArgs, wantSQL, wantArgs)
	}
}
