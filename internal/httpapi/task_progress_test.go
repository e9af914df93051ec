package httpapi_test

import (
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/testdate"
)

// progressJSON is a task's counts as GET /tasks/{id} shows them.
type progressJSON struct {
	ID        string  `json:"id"`
	State     string  `json:"state"`
	Total     int64   `json:"total"`
	Processed int64   `json:"processed"`
	Remaining int64   `json:"remaining"`
	Progress  float64 `json:"progress"`
	Skipped   struct {
		Count   int64            `json:"count"`
		Reasons map[string]int64 `json:"reasons"`
	} `json:"skipped"`
	Canary *struct {
		Phase   string `json:"phase"`
		Sampled int64  `json:"sampled"`
	} `json:"canary"`
}

// A bulk retry with a canary counts 72 dead letters. While it watches its
// sample, operators retry 6 of the others one by one and delete 4: when the
// canary passes, the task gets to 62 records, not 72. Its progress adds up
// all the same — processed + skipped + remaining = total, progress 1 — and
// says why the 10 were left: they no longer matched its filter.
func TestACanaryRetryAccountsForRecordsThatLeftItsFilter(t *testing.T) {
	t.Parallel()
	// The watch ends when the test moves the clock.
	clk := clock.NewPinned(testdate.Now().UTC())
	b := start(t, options{clock: clk})
	ids := b.seed(t, make([]rec, 72)...)
	slices.Sort(ids) // the task's order; its sample is the first 5

	var created struct {
		Task progressJSON `json:"task"`
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{
		"filter": map[string]any{"queue": "orders", "state": "discarded"}, "confirm": true,
		"canary": map[string]any{"sample": 5, "watch": "PT10M", "abort_if_refail": 0.5}}, &created), http.StatusAccepted)
	if tj := created.Task; tj.Total != 72 || tj.Processed != 0 || tj.Remaining != 72 || tj.Skipped.Count != 0 || tj.Progress != 0 {
		t.Fatalf("created: %+v", tj)
	}
	get := func() progressJSON {
		t.Helper()
		var tj progressJSON
		wantStatus(t, b.get(t, "/ojs/v1/tasks/"+created.Task.ID, &tj), http.StatusOK)
		if sum := tj.Processed + tj.Skipped.Count + tj.Remaining; sum != tj.Total {
			t.Fatalf("processed %d + skipped %d + remaining %d = %d, total %d", tj.Processed, tj.Skipped.Count, tj.Remaining, sum, tj.Total)
		}
		return tj
	}
	// The sample is retried and redelivered (nothing consumes orders); the
	// watch lasts until the clock moves.
	var watching progressJSON
	waitProgress(t, "the canary's watch", func() bool {
		watching = get()
		return watching.Canary != nil && watching.Canary.Phase == "watch"
	})
	if watching.Processed != 5 || watching.Remaining != 67 || watching.Progress*72 < 4.99 || watching.Progress*72 > 5.01 {
		t.Fatalf("watching: %+v", watching)
	}

	for _, id := range ids[10:16] {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry", nil, nil), http.StatusOK)
	}
	for _, id := range ids[40:44] {
		wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter/"+id, nil, nil), http.StatusOK)
	}
	clk.Advance(10 * time.Minute)

	var done progressJSON
	waitProgress(t, "the task completed", func() bool {
		done = get()
		return done.State == "completed"
	})
	want := map[string]int64{"no_longer_matches": 10}
	if done.Total != 72 || done.Processed != 62 || done.Skipped.Count != 10 || !maps.Equal(done.Skipped.Reasons, want) ||
		done.Remaining != 0 || done.Progress != 1 || done.Canary.Phase != "passed" {
		t.Fatalf("completed: %+v; want 72 = 62 processed + 10 skipped %v, progress 1", done, want)
	}
	if n := b.count(t, "queue = 'orders' AND state = 'discarded'"); n != 0 {
		t.Errorf("%d dead letters left", n)
	}
}

// waitProgress waits until cond holds (a whole processor runs the task).
func waitProgress(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, what, cond, eventually.Within(60*time.Second))
}
