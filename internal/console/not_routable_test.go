package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/eventually"
)

// A record the scheduler refused to produce (its topic is Redrive's own: a
// record stored before ingest refused such sources) says on its page that it
// was not redelivered and why, and that nothing will try again: there is no
// next attempt to count down to.
func TestTheRecordPageSaysWhenARecordIsNotRoutable(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	s.kcat(t, "looped-1", `{"n":1}`, "redrive.source.topic=orders", "redrive.error.type=db.timeout",
		"redrive.error.message=timed out")
	s.waitTotal(t, "key=looped-1", 1)
	id := s.recordID(t, "looped-1")
	// As a forged record stored by an older Redrive would be: due now, on
	// the DLQ topic itself.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `WITH d AS (UPDATE redrive_record_data SET queue = $1 WHERE id = $2)
		UPDATE redrive_lifecycle SET queue = $1, state = 'retryable', exhaustion = NULL,
		discarded_at = NULL, next_retry_at = now() WHERE id = $2`, dlqTopic, id); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the scheduler refuses it", func() bool {
		var r map[string]any
		s.api(t, "GET", "/ojs/v1/dead-letter/"+id, &r)
		f, _ := r["redelivery_failure"].(map[string]any)
		return f != nil && f["reason"] == "not_routable"
	}, eventually.Within(30*time.Second))
	b := newBrowser(t)
	b.run(t, "the record page", chromedp.Navigate(s.base+"/ui/records/"+id), waitText("h1", "Record looped-1"),
		waitText("main", "not redelivered (not_routable)"), waitText("main", "not tried again"))
}
