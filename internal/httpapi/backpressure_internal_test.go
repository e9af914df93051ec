package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// admitJobs is what POST /ojs/v1/jobs and /jobs/batch ask before storing
// (OJS backpressure spec): it reads a bounded queue's depth — available +
// scheduled + retryable, not the jobs a worker holds (§3) — and refuses n
// jobs that would take it past max_depth with 429 QUEUE_FULL, Retry-After
// and the depth headers (§5.1, §7.1, §7.2), a batch whole (§9.3). Admitted,
// the answer says the depth with the new jobs and, past the warning
// threshold, the pressure (§7.3).
func TestAdmitJobsBoundsTheDepth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rec, err := records.New(records.Config{Store: store.New(pool)})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewPinned(testdate.Now().UTC().Truncate(time.Millisecond))
	s := New(Config{Records: rec, AuthDisabled: true, Now: clk.Now})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	call := func(method, path string, body any) *http.Response {
		t.Helper()
		b, _ := json.Marshal(body)
		r, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(b))
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	publish := func(n int) {
		t.Helper()
		for range n {
			if r := call(http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "report.build", "queue": "bp", "args": []any{}}); r.StatusCode != http.StatusCreated {
				t.Fatalf("publish: %d", r.StatusCode)
			}
		}
	}

	// Unbounded (the default, §6.3): nothing to say, nothing read.
	if h, err := s.admitJobs(ctx, "bp", 1000); h != nil || err != nil {
		t.Fatalf("unbounded queue: %v, %v", h, err)
	}
	if r := call(http.MethodPut, "/ojs/v1/admin/queues/bp/config", map[string]any{"backpressure": map[string]any{"max_depth": 3, "strategy": "reject"}}); r.StatusCode != http.StatusOK {
		t.Fatalf("configure: %d", r.StatusCode)
	}
	type want struct {
		depth, bound, pressure string
		full                   bool
	}
	check := func(what string, n int, w want) {
		t.Helper()
		h, err := s.admitJobs(ctx, "bp", n)
		var apiErr *APIError
		switch {
		case w.full && (!errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests || apiErr.Code != "QUEUE_FULL" ||
			apiErr.Details["queue"] != "bp" || apiErr.Details["bound"] != int64(3) || h.Get("Retry-After") != "5"):
			t.Errorf("%s: %v (headers %v), want 429 QUEUE_FULL with Retry-After", what, err, h)
		case !w.full && err != nil:
			t.Errorf("%s: %v, want admitted", what, err)
		}
		if got := (want{h.Get(HeaderQueueDepth), h.Get(HeaderQueueBound), h.Get(HeaderQueuePressure), w.full}); got != w {
			t.Errorf("%s: headers %v, want %+v", what, h, w)
		}
	}
	check("empty, one job", 1, want{depth: "1", bound: "3"})
	check("empty, a batch of 3 (at the bound)", 3, want{depth: "3", bound: "3", pressure: "1"})
	check("empty, a batch of 4", 4, want{depth: "0", bound: "3", full: true})
	publish(2)
	// 3 of 3 after it: past the default warning threshold 0.8.
	check("2 waiting, one job", 1, want{depth: "3", bound: "3", pressure: "1"})
	publish(1)
	check("full", 1, want{depth: "3", bound: "3", full: true})
	// What a publish handler calls: the headers go on its answer, the 429
	// is returned for the error handler to write.
	w := httptest.NewRecorder()
	c := s.echo.NewContext(httptest.NewRequest(http.MethodPost, "/ojs/v1/jobs", nil), w)
	var apiErr *APIError
	if err := s.admit(c, "bp", 1); !errors.As(err, &apiErr) || apiErr.Code != CodeQueueFull ||
		w.Header().Get("Retry-After") != "5" || w.Header().Get(HeaderQueueDepth) != "3" || w.Header().Get(HeaderQueueBound) != "3" {
		t.Errorf("admit: %v, headers %v", err, w.Header())
	}

	// A job a worker holds is not in the depth (§3: available + scheduled
	// + retryable).
	if r := call(http.MethodPost, "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"bp"}, "count": 1}); r.StatusCode != http.StatusOK {
		t.Fatalf("fetch: %d", r.StatusCode)
	}
	check("one held", 1, want{depth: "3", bound: "3", pressure: "1"})
	// A higher bound and a lower threshold: 3 of 4 is 0.75, past 0.5;
	// the depth alone, 2 of 4, is not past it.
	if r := call(http.MethodPut, "/ojs/v1/queues/bp/config", map[string]any{"backpressure": map[string]any{"max_depth": 4, "warning_threshold": 0.5}}); r.StatusCode != http.StatusOK {
		t.Fatalf("configure: %d", r.StatusCode)
	}
	check("threshold 0.5", 1, want{depth: "3", bound: "4", pressure: "0.75"})
	check("threshold 0.5, no job", 0, want{depth: "2", bound: "4"})
}
