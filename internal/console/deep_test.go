package console_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/testdate"
)

// nested is a JSON value nesting depth levels, objects and arrays in turn,
// around the string "bottom".
func nested(depth int, bottom string) string {
	return strings.Repeat(`{"a":[`, depth/2) + `"` + bottom + `"` + strings.Repeat(`]}`, depth/2)
}

// storeAsText stores a copy of the record with key from under key to, with
// value as its value and no JSON payload: how the store keeps a value that
// Postgres cannot take as jsonb (ingest cannot store one on its own yet).
func (s *server) storeAsText(t *testing.T, from, to, value string) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	id := dlq.NewID(testdate.Now())
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`CREATE TEMP TABLE deep ON COMMIT DROP AS SELECT * FROM redrive_record_data WHERE key = $1`, []any{[]byte(from)}},
		{`CREATE TEMP TABLE deep_lifecycle ON COMMIT DROP AS SELECT l.* FROM redrive_lifecycle l JOIN deep d ON d.id = l.id`, nil},
		{`UPDATE deep SET id = $1, key = $2, value = $3, payload = NULL, dlq_offset = dlq_offset + 1000000`,
			[]any{id, []byte(to), []byte(value)}},
		{`UPDATE deep_lifecycle SET id = $1, bytes = $2`, []any{id, len(to) + len(value)}},
		{`INSERT INTO redrive_record_data SELECT * FROM deep`, nil},
		{`INSERT INTO redrive_lifecycle SELECT * FROM deep_lifecycle`, nil},
	} {
		if _, err := tx.Exec(ctx, stmt.sql, stmt.args...); err != nil {
			t.Fatalf("%s: %v", stmt.sql, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// recordID finds the id of the record with key.
func (s *server) recordID(t *testing.T, key string) string {
	t.Helper()
	var p page
	s.api(t, "GET", "/ojs/v1/dead-letter?key="+url.QueryEscape(key), &p)
	if len(p.Items) != 1 {
		t.Fatalf("key %s: %d records", key, len(p.Items))
	}
	return p.Items[0]["id"].(string)
}

// A value nested thousands of levels deep neither crashes the record page
// nor keeps the record from being retried, edited or deleted: the JSON tree
// is drawn from an explicit stack and turns to text past 64 levels; past what
// the API hands out as JSON (10,000 levels), the value is text.
func TestDeeplyNestedValuesCanBeViewedRetriedAndDeleted(t *testing.T) {
	s := startServer(t)
	depths := []int{2_000, 9_000, 20_000}
	for _, d := range depths[:2] {
		for _, what := range []string{"now", "edit", "delete"} {
			s.kcat(t, fmt.Sprintf("deep-%d-%s", d, what), nested(d, "bottom"),
				"redrive.source.topic=orders", "redrive.error.type=deep.value", "redrive.error.message=nested deep")
		}
	}
	s.waitTotal(t, "error_type=deep.value", 6)
	// 20,000 levels: more than Postgres's jsonb (stack depth limit exceeded)
	// or Go's JSON (10,000) take.
	for _, what := range []string{"now", "edit", "delete"} {
		s.storeAsText(t, "deep-2000-"+what, "deep-20000-"+what, nested(20_000, "bottom"))
	}
	b := newBrowser(t)
	for _, d := range depths {
		key := func(what string) string { return fmt.Sprintf("deep-%d-%s", d, what) }
		// Past 2,000 values a tree opens folded; the note says how deep it
		// nests, also past what Go's JSON (and so the API's payload) takes.
		view := waitText("#value-deep", fmt.Sprintf("nests %d,%03d levels deep", d/1000, d%1000))

		// The page renders, the tree opens a level at a time, Raw shows the
		// whole text; Retry now retries.
		id := s.recordID(t, key("now"))
		b.run(t, fmt.Sprintf("the record page of %s", key("now")), chromedp.Navigate(s.base+"/ui/records/"+id),
			waitText("h1", "Record "+key("now")), view, waitText("#errors", "nested deep"),
			click("#value-tree > details > summary"), waitText("#value-tree > details > ul", `"a"`),
			click("#value-as-raw"), waitText("#value-raw", `"bottom"`))
		if got := eval[int](t, b, `document.querySelector("#value-raw").textContent.length`); got != len(nested(d, "bottom")) {
			t.Errorf("%s: Raw shows %d characters, want the %d stored", key("now"), got, len(nested(d, "bottom")))
		}
		if d == 2_000 {
			eval[bool](t, b, `document.querySelector("#value-deep").scrollIntoView(); true`)
			b.screenshots(t, "record-deep")
		}
		b.run(t, "retry "+key("now"), click("#retry-now"), waitText("main", "Retried: the record goes back to its topic now."))

		// Retry with an edit: the editor opens on the value, the review
		// shows the change, and the edited record is retried.
		id = s.recordID(t, key("edit"))
		b.run(t, "edit "+key("edit"), chromedp.Navigate(s.base+"/ui/records/"+id), waitText("h1", "Record "+key("edit")), view,
			click("#retry-edit"), chromedp.WaitVisible(chromedp.CSS("#edit-value")),
			setValue("#edit-value", nested(d, "fixed")),
			click("#edit-review-button"), waitText("#edit-review", `"fixed"`),
			click("#edit-confirm"), waitText("main", "Retried with your changes"))

		// Delete, after the confirmation.
		id = s.recordID(t, key("delete"))
		b.run(t, "delete "+key("delete"), chromedp.Navigate(s.base+"/ui/records/"+id), waitText("h1", "Record "+key("delete")), view,
			click("#delete"), waitURL("/ui/records?queue=orders"))
		if code := s.api(t, "GET", "/ojs/v1/dead-letter/"+id, nil); code != 404 {
			t.Errorf("%s after Delete: GET answers %d, want 404", key("delete"), code)
		}
	}

	// Both retries were taken: the records were produced back to orders,
	// the edited one with its edit.
	for _, d := range depths {
		for _, what := range []string{"now", "edit"} {
			k := fmt.Sprintf("deep-%d-%s", d, what)
			eventually.True(t, k+" redelivered", func() bool {
				var p page
				s.api(t, "GET", "/ojs/v1/dead-letter?key="+k, &p)
				return len(p.Items) == 1 && p.Items[0]["redelivered_at"] != nil
			}, eventually.Within(30*time.Second))
		}
	}
}
