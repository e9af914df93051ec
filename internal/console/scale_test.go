package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// storeRecords writes records straight to the server's database, as ingest
// would have stored them (the triggers keep the statistics current).
func (s *server) storeRecords(t testing.TB, recs []dlq.Record) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	for start := 0; start < len(recs); start += 5000 {
		if _, err := st.InsertRecords(ctx, recs[start:min(start+5000, len(recs))]); err != nil {
			t.Fatal(err)
		}
	}
}

// dlqOffset numbers the stored failures (tests run in parallel).
var dlqOffset atomic.Int64

// screenshots saves the page at 1400 and at 800 px wide (name-1400.png,
// name-800.png), then puts the window's size back.
func (b *browser) screenshots(t testing.TB, name string) {
	t.Helper()
	for _, w := range []int64{1400, 800} {
		b.run(t, fmt.Sprintf("a %d px wide window", w), chromedp.EmulateViewport(w, 900))
		b.screenshot(t, fmt.Sprintf("%s-%d", name, w))
	}
	b.run(t, "the window's size back", chromedp.EmulateViewport(1280, 860))
}

// failure is a stored failure of queue: retryable (its retry a day away) or
// a dead letter.
func failure(queue, key string, value []byte, deadLetter bool) dlq.Record {
	now := testdate.Now().UTC()
	id := uuid.MustParse(dlq.NewID(testdate.Now()))
	retry, _ := json.Marshal(policy.Default())
	off := dlqOffset.Add(1)
	r := dlq.Record{ID: id.String(), Queue: queue, Type: "order", State: dlq.StateRetryable,
		Attempt: 1, MaxAttempts: 5, Format: dlq.FormatRedrive,
		Source: dlq.Source{Topic: queue, Partition: 0, Offset: off},
		DLQ:    dlq.Coord{Topic: dlqTopic, Partition: 0, Offset: off},
		Key:    []byte(key), Value: value, Retry: retry, Meta: json.RawMessage(`{}`),
		Errors:    []dlq.ErrorEntry{{Attempt: 1, Type: "db.timeout", Message: "timed out", Code: dlq.CodeRetry, OccurredAt: now}},
		CreatedAt: now, UpdatedAt: now}
	if deadLetter {
		r.State, r.Exhaustion, r.DiscardedAt = dlq.StateDiscarded, dlq.ExhaustionDeadLetter, &now
	} else {
		later := now.Add(24 * time.Hour)
		r.NextRetryAt = &later
	}
	return r
}

// manyQueues stores one failure in each of n queues q-00000, q-00001, … (a
// dead letter for the odd ones), and more in two: hot-orders (30 waiting)
// and warm-payments (10 dead letters).
func manyQueues(t testing.TB, s *server, n int) {
	t.Helper()
	recs := make([]dlq.Record, 0, n+40)
	for i := range n {
		q := fmt.Sprintf("q-%05d", i)
		recs = append(recs, failure(q, q+"-k", []byte(`{"n":1}`), i%2 == 1))
	}
	for i := range 30 {
		recs = append(recs, failure("hot-orders", fmt.Sprintf("hot-%d", i), []byte(`{"n":1}`), false))
	}
	for i := range 10 {
		recs = append(recs, failure("warm-payments", fmt.Sprintf("warm-%d", i), []byte(`{"n":1}`), true))
	}
	s.storeRecords(t, recs)
}

// With 20,000 source topics the overview shows the top queues, not all of
// them: its DOM stays small, a search finds a queue by part of its name on
// the server, the sort switches, and "more" pages on.
func TestTheOverviewOf20000QueuesShowsTheTopOnes(t *testing.T) {
	s := startServer(t, "REDRIVE_ARCHIVE_TOPIC", "off")
	manyQueues(t, s, 20_000)
	// The newest failure has a key of 3,000 bytes with nowhere to break a
	// line: a list shows a preview of it (the API cuts it to 1 KiB).
	longKey := "order-" + strings.Repeat("0123456789abcdef", 200)[:2994]
	s.storeRecords(t, []dlq.Record{failure("hot-orders", longKey, []byte(`{"n":1}`), false)})
	b := newBrowser(t)

	took := b.load(t, s.base+"/ui/")
	nodes := b.count(t, "*")
	t.Logf("the overview of 20,000 queues rendered in %v (first load) with %d DOM nodes", took.Round(time.Millisecond), nodes)
	for i := range 3 {
		t.Logf("load %d: %v", i+2, b.load(t, s.base+"/ui/").Round(time.Millisecond))
	}
	b.screenshots(t, "overview-20k")
	b.run(t, "the newest failures", waitText("table.records", "order-0123456789abcdef"))
	longKeyShown(t, b, "table.records", "overview")
	if nodes > 3000 {
		t.Errorf("the overview has %d DOM nodes, want a bounded page (at most 3,000)", nodes)
	}
	b.run(t, "the overview's top queues", waitText("#queue-count", "20,002 queues"))
	rows := b.count(t, "table.queues tbody tr")
	if rows != 20 {
		t.Errorf("the overview shows %d queues, want the top 20", rows)
	}
	if first := b.text(t, "table.queues tbody tr:first-child td"); first != "hot-orders" {
		t.Errorf("the first queue by depth is %q, want hot-orders", first)
	}

	// Sort by dead letters: warm-payments first.
	b.run(t, "sort by dead letters", setValue("#queue-sort", "dead_letter"),
		until("warm-payments first", `(document.querySelector("table.queues tbody tr td") || {}).textContent === "warm-payments"`))
	b.run(t, "the sort is in the URL", waitURL("sort=dead_letter"))

	// A search by substring, answered by the server.
	b.run(t, "search for 1234", setValue("#queue-search", "1234"),
		until("the matching queues only", `[...document.querySelectorAll("table.queues tbody tr td:first-child")].every((td) => td.textContent.includes("1234"))`),
		waitText("#queue-count", "12 queues match"))
	if got := b.text(t, "table.queues"); !strings.Contains(got, "q-01234") || !strings.Contains(got, "q-12345") {
		t.Errorf("a search for 1234 shows %q, want q-01234 and q-12345 among them", got)
	}
	b.run(t, "search for one queue", setValue("#queue-search", "Q-19999"),
		until("q-19999 alone", `document.querySelectorAll("table.queues tbody tr").length === 1`), waitText("table.queues", "q-19999"))
	b.screenshots(t, "overview-search")

	// By name, and twenty more.
	b.run(t, "clear the search, sort by name", setValue("#queue-search", ""), setValue("#queue-sort", "name"),
		until("hot-orders first", `(document.querySelector("table.queues tbody tr td") || {}).textContent === "hot-orders"`))
	b.run(t, "twenty more", click("#queue-more"), until("40 rows", `document.querySelectorAll("table.queues tbody tr").length === 40`))
	if got := b.text(t, "table.queues tbody tr:nth-child(40) td"); got != "q-00038" {
		t.Errorf("the 40th queue by name is %q, want q-00038", got)
	}

	// The long key in the records list.
	b.run(t, "the records of hot-orders", chromedp.Navigate(s.base+"/ui/records?queue=hot-orders"),
		waitText("table.records", "order-0123456789abcdef"))
	longKeyShown(t, b, "table.records", "records")
}

// longKeyShown checks that the list in sel shows the 3,000-byte key as a
// short preview, with an ellipsis and the key's size, and that the page fits
// a window 800 px wide (wide tables scroll in their own box).
func longKeyShown(t *testing.T, b *browser, sel, page string) {
	t.Helper()
	link := sel + ` a[href^="/ui/records/"]`
	shown := b.text(t, link)
	if !strings.HasPrefix(shown, "order-0123456789abcdef") || !strings.HasSuffix(shown, "…") || len(shown) > 200 {
		t.Errorf("%s shows the 3,000-byte key as %q (%d bytes), want a short preview ending in …", sel, shown, len(shown))
	}
	if row := b.text(t, sel+" tbody tr"); !strings.Contains(row, "3,000 bytes") {
		t.Errorf("%s: the row of the long key is %q, want its size (3,000 bytes)", sel, row)
	}
	for _, w := range []int64{1400, 800} {
		b.run(t, fmt.Sprintf("a %d px wide window", w), chromedp.EmulateViewport(w, 900))
		fits := eval[bool](t, b, fmt.Sprintf(`(() => {
			const doc = document.documentElement, list = document.querySelector(%q);
			return doc.scrollWidth <= doc.clientWidth && list.getBoundingClientRect().right <= doc.clientWidth;
		})()`, sel))
		if !fits {
			t.Errorf("at %d px the page is %d px wide with %s: the long key breaks the layout", w,
				eval[int](t, b, `document.documentElement.scrollWidth`), sel)
		}
	}
	eval[bool](t, b, fmt.Sprintf(`document.querySelector(%q).scrollIntoView(), true`, sel))
	b.screenshots(t, "long-key-"+page)
}
