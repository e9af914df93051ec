package httpapi_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// ojsJob is what the OJS shapes of the dead-letter routes add to a record
// (HTTP binding §12.1, §12.2; core §5.3), beside the fields Redrive's
// clients read.
type ojsJob struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Errors []struct {
		Type string `json:"type"`
	} `json:"errors"`
	Error *struct {
		Type       string   `json:"type"`
		Message    string   `json:"message"`
		Backtrace  []string `json:"backtrace"`
		Code       string   `json:"code"`
		Attempt    int      `json:"attempt"`
		OccurredAt string   `json:"occurred_at"`
	} `json:"error"`
}

type ojsList struct {
	Items      []ojsJob `json:"items"`
	Jobs       []ojsJob `json:"jobs"`
	Pagination struct {
		Total   int64  `json:"total"`
		Limit   int    `json:"limit"`
		Offset  *int64 `json:"offset"`
		Page    *int64 `json:"page"`
		PerPage int    `json:"per_page"`
		HasMore bool   `json:"has_more"`
	} `json:"pagination"`
}

func jobIDs(js []ojsJob) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// The list names its records jobs as §12.1 does, beside items; each has
// error, its latest error (core §5.3); the pagination says offset (§12.1)
// and page and per_page (admin API §7.1). The admin path answers the same.
func TestDeadLetterListHasJobsErrorAndOffset(t *testing.T) {
	b := setup(t)
	b.seed(t, rec{errType: "db.down"}, rec{errType: "db.down"}, rec{errType: "db.down"})
	for _, base := range []string{"/ojs/v1/dead-letter", "/ojs/v1/admin/dead-letter"} {
		var l ojsList
		wantStatus(t, b.get(t, base+"?limit=2", &l), http.StatusOK)
		if len(l.Items) != 2 || !slices.Equal(jobIDs(l.Jobs), jobIDs(l.Items)) {
			t.Fatalf("%s: jobs %v, items %v: want the same 2 records", base, jobIDs(l.Jobs), jobIDs(l.Items))
		}
		for _, j := range l.Jobs {
			e := j.Error
			if e == nil || e.Type != "db.down" || e.Message != "boom" || e.Attempt != 3 || e.Code != "RETRY" ||
				!slices.Equal(e.Backtrace, []string{"at x.go:1"}) || e.OccurredAt == "" {
				t.Fatalf("%s: error %+v, want the latest error (attempt 3, boom)", base, e)
			}
		}
		pg := l.Pagination
		if pg.Offset == nil || *pg.Offset != 0 || pg.Page == nil || *pg.Page != 1 || pg.PerPage != 2 || pg.Total != 3 || !pg.HasMore {
			t.Fatalf("%s: first page's pagination %+v", base, pg)
		}
		wantStatus(t, b.get(t, base+"?limit=2&offset=2", &l), http.StatusOK)
		pg = l.Pagination
		if len(l.Jobs) != 1 || pg.Offset == nil || *pg.Offset != 2 || pg.Page == nil || *pg.Page != 2 || pg.HasMore {
			t.Fatalf("%s: second page %d jobs, pagination %+v", base, len(l.Jobs), pg)
		}
	}
}

// GET of one record has error too; a record without errors shows null.
func TestDeadLetterRecordHasItsLatestError(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, rec{errType: "card.declined"})
	for _, p := range []string{"/ojs/v1/dead-letter/", "/ojs/v1/admin/dead-letter/"} {
		var j ojsJob
		wantStatus(t, b.get(t, p+ids[0], &j), http.StatusOK)
		if j.ID != ids[0] || j.Error == nil || j.Error.Type != "card.declined" || j.Error.Message != "boom" || len(j.Errors) != 2 {
			t.Fatalf("%s: %+v, want error the latest of 2 errors", p, j)
		}
	}
}

// A retry answers the record, as before, and job, HTTP binding §12.2's
// summary: available, attempt 0, re_enqueued_at. The admin path retries
// the same way.
func TestDeadLetterRetryAnswersJob(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, rec{}, rec{})
	for i, p := range []string{"/ojs/v1/dead-letter/", "/ojs/v1/admin/dead-letter/"} {
		var out struct {
			ojsJob
			Attempt int `json:"attempt"`
			Job     struct {
				ID           string `json:"id"`
				State        string `json:"state"`
				Queue        string `json:"queue"`
				Attempt      int    `json:"attempt"`
				MaxAttempts  int    `json:"max_attempts"`
				ReEnqueuedAt string `json:"re_enqueued_at"`
			} `json:"job"`
		}
		wantStatus(t, b.send(t, http.MethodPost, p+ids[i]+"/retry", nil, &out), http.StatusOK)
		j := out.Job
		if out.ID != ids[i] || out.State != "available" || j.ID != ids[i] || j.State != "available" || j.Attempt != 0 ||
			j.Queue != "orders" || j.MaxAttempts != 3 || j.ReEnqueuedAt == "" {
			t.Fatalf("%s retry: %+v, want the record and job available with attempt 0", p, out)
		}
		if _, err := time.Parse(time.RFC3339, j.ReEnqueuedAt); err != nil {
			t.Fatalf("re_enqueued_at %q: %v", j.ReEnqueuedAt, err)
		}
	}
}

// The admin path deletes a record as DELETE /ojs/v1/dead-letter/{id} does
// (200 with HTTP binding §12.3's body).
func TestAdminDeadLetterDelete(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, rec{})
	var out struct {
		Deleted bool   `json:"deleted"`
		JobID   string `json:"job_id"`
	}
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/admin/dead-letter/"+ids[0], nil, &out), http.StatusOK)
	if !out.Deleted || out.JobID != ids[0] {
		t.Fatalf("delete: %+v", out)
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/"+ids[0], nil), http.StatusNotFound)
	if au := b.audit(t, "dead_letter.delete"); len(au) != 1 {
		t.Fatalf("%d audit entries of the admin delete, want 1", len(au))
	}
}

// Pause and resume answer the queue as before, with HTTP binding §11.3 and
// §11.4's queue, status and paused_at or resumed_at, and the admin API
// §6.3's paused; so do the admin paths.
func TestPauseResumeAnswerOJSFields(t *testing.T) {
	b := setup(t)
	b.seed(t, rec{queue: "orders", state: dlq.StateRetryable})
	for _, base := range []string{"/ojs/v1/queues/orders", "/ojs/v1/admin/queues/orders"} {
		type answer struct {
			Name      string  `json:"name"`
			State     string  `json:"state"`
			Queue     string  `json:"queue"`
			Status    string  `json:"status"`
			Paused    *bool   `json:"paused"`
			PausedAt  *string `json:"paused_at"`
			ResumedAt *string `json:"resumed_at"`
		}
		var p, r answer
		wantStatus(t, b.send(t, http.MethodPost, base+"/pause", nil, &p), http.StatusOK)
		if p.Name != "orders" || p.State != "paused" || p.Queue != "orders" || p.Status != "paused" || p.Paused == nil || !*p.Paused ||
			p.PausedAt == nil || p.ResumedAt != nil {
			t.Fatalf("%s/pause: %+v", base, p)
		}
		wantStatus(t, b.send(t, http.MethodPost, base+"/resume", nil, &r), http.StatusOK)
		if r.Name != "orders" || r.State != "active" || r.Queue != "orders" || r.Status != "active" || r.Paused == nil || *r.Paused ||
			r.ResumedAt == nil || r.PausedAt != nil {
			t.Fatalf("%s/resume: %+v", base, r)
		}
	}
	if au := b.audit(t, "queue.pause"); len(au) != 2 {
		t.Fatalf("%d queue.pause audit entries, want 2 (the admin path is audited as the route it aliases)", len(au))
	}
}
