package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/testdate"
)

// An operator may retry any record that is neither in flight nor completed —
// one by one or in bulk — and a refusal says which it is. Unacknowledged
// records are shown, counted per queue and filtered.
func TestRetryTakesEveryRecordNeitherInFlightNorCompleted(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	// Paused, so that the scheduler leaves the records as they are seeded.
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/billing/pause", nil, nil), http.StatusOK)
	ids := b.seed(t, rec{queue: "billing", state: dlq.StateAvailable}, rec{queue: "billing", state: dlq.StateAvailable},
		rec{queue: "billing", state: dlq.StateAvailable}, rec{queue: "billing", state: dlq.StateCompleted},
		rec{queue: "billing", state: dlq.StateCompleted}, rec{queue: "billing", state: dlq.StateRetryable}, rec{queue: "billing"})
	unacked, flying, awaiting, byRedelivery, byAck := ids[0], ids[1], ids[2], ids[3], ids[4]
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := b.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	past, due := testdate.Now().Add(-time.Hour), testdate.Now().Add(time.Hour)
	// Redelivered under completion: ack: one overdue and marked, one still
	// waiting for its ack, one being produced right now (its claim open).
	exec(`UPDATE redrive_lifecycle SET ack_due_at = $2, unacknowledged_at = $2, redelivered_at = $2 WHERE id = $1`, unacked, past)
	exec(`UPDATE redrive_lifecycle SET ack_due_at = $2, redelivered_at = now() WHERE id = $1`, awaiting, due)
	exec(`INSERT INTO redrive_claim (token, owner, queue, claimed_at, expires_at, ids, prior_states)
		VALUES ('01a2155f-0000-7000-8000-000000000001', 'test', 'billing', now(), now() + interval '30 seconds', ARRAY[$1::uuid], ARRAY['retryable'])`, flying)
	exec(`UPDATE redrive_lifecycle SET claim_token = '01a2155f-0000-7000-8000-000000000001', ack_due_at = $2 WHERE id = $1`, flying, due)
	exec(`UPDATE redrive_lifecycle SET completed_by = 'redelivered' WHERE id = $1`, byRedelivery)
	exec(`UPDATE redrive_lifecycle SET completed_by = 'ack' WHERE id = $1`, byAck)

	var one struct {
		recordJSON
		InFlight         *bool   `json:"in_flight"`
		CompletedBy      *string `json:"completed_by"`
		AckDueAt         *string `json:"ack_due_at"`
		UnacknowledgedAt *string `json:"unacknowledged_at"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/"+flying, &one), http.StatusOK)
	// Shown as it was before its claim (retryable) until the produce lands.
	if one.InFlight == nil || !*one.InFlight || one.State != "retryable" || one.AckDueAt != nil {
		t.Errorf("record in flight: %s, in_flight %v, ack_due_at %v; want retryable, true, null", one.State, one.InFlight, one.AckDueAt)
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/"+unacked, &one), http.StatusOK)
	if one.InFlight == nil || *one.InFlight || one.UnacknowledgedAt == nil || one.AckDueAt == nil {
		t.Errorf("unacknowledged record: in_flight %v, unacknowledged_at %v, ack_due_at %v", one.InFlight, one.UnacknowledgedAt, one.AckDueAt)
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/"+byRedelivery, &one), http.StatusOK)
	if one.CompletedBy == nil || *one.CompletedBy != "redelivered" {
		t.Errorf("completed by redelivery: completed_by %v", one.CompletedBy)
	}

	// Lists filter on the mark, and the queue counts it.
	var l listJSON
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter?queue=billing&unacknowledged=true", &l), http.StatusOK)
	if len(l.Items) != 1 || l.Items[0].ID != unacked || l.Pagination.Total != 1 {
		t.Errorf("unacknowledged=true: %+v", l)
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter?queue=billing&state=available&unacknowledged=false", &l), http.StatusOK)
	if l.Pagination.Total != 2 {
		t.Errorf("available, unacknowledged=false: total %d, want 2", l.Pagination.Total)
	}
	wantError(t, "unacknowledged=yes", b.get(t, "/ojs/v1/dead-letter?unacknowledged=yes", nil), 400, "invalid_request", "unacknowledged")
	var q queueJSON
	wantStatus(t, b.get(t, "/ojs/v1/queues/billing", &q), http.StatusOK)
	st := q.Stats
	if st["available"] != 3 || st["unacknowledged"] != 1 || st["completed"] != 2 || st["retryable"] != 1 || st["dead_letter"] != 1 ||
		st["retryable"]+st["available"]+st["completed"]+st["dead_letter"]+st["discard"] != st["total"] {
		t.Errorf("billing stats = %v", st)
	}

	// Refusals say why.
	for _, c := range []struct{ id, what, says string }{
		{flying, "in flight", "is being redelivered right now"},
		{byRedelivery, "completed by its redelivery", "its redelivery was produced and no failure came back"},
		{byAck, "acknowledged", "the consumer acknowledged its redelivery"},
	} {
		r := b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+c.id+"/retry", nil, nil)
		wantError(t, "retry "+c.what, r, http.StatusConflict, "conflict", "")
		if e := r.err(t); !strings.Contains(e.Error.Message, c.says) {
			t.Errorf("retry %s: %q, want it to say %q", c.what, e.Error.Message, c.says)
		}
	}
	// A bulk retry takes the others: the unacknowledged record, the one
	// waiting for its ack, the retryable one and the dead letter.
	var dry struct {
		WouldAffect int64 `json:"would_affect"`
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{"filter": map[string]any{"queue": "billing"}}, &dry), http.StatusOK)
	if dry.WouldAffect != 4 {
		t.Errorf("bulk retry would affect %d, want 4", dry.WouldAffect)
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry",
		map[string]any{"filter": map[string]any{"queue": "billing", "unacknowledged": true}}, &dry), http.StatusOK)
	if dry.WouldAffect != 1 {
		t.Errorf("bulk retry of unacknowledged records would affect %d, want 1", dry.WouldAffect)
	}
	// And one by one.
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+unacked+"/retry", nil, &one), http.StatusOK)
	if one.State != "available" || one.UnacknowledgedAt != nil || one.NextRetryAt == nil || one.Attempt != 0 {
		t.Errorf("retried unacknowledged record: %s unacknowledged %v next %v attempt %d", one.State, one.UnacknowledgedAt, one.NextRetryAt, one.Attempt)
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+awaiting+"/retry", nil, nil), http.StatusOK)
	if n := b.count(t, "unacknowledged_at IS NOT NULL OR ack_due_at IS NOT NULL AND id <> $1", flying); n != 0 {
		t.Errorf("%d records keep an ack mark after their retry", n)
	}
}
