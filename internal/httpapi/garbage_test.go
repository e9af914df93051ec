package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
)

// A record with no topic to go back to — unparseable, or of one of Redrive's
// own topics — is never produced back into the DLQ, where it would return as
// a repeat failure in a loop: a retry needs override.queue (409), naming one
// of Redrive's own topics is refused (422), and bulk retries skip it.
func TestGarbageCannotBeRetriedIntoTheDLQ(t *testing.T) {
	b := setup(t)
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers), &kgo.Record{Topic: dlqTopic, Value: []byte("not an envelope")})
	var l listJSON
	eventually.True(t, "the unparseable record", func() bool {
		b.get(t, "/ojs/v1/dead-letter?error_type=redrive.unparseable", &l)
		return len(l.Items) == 1
	}, eventually.Within(30*time.Second))
	garbage := l.Items[0].ID
	own := b.seed(t, rec{queue: dlqTopic + ".events"})[0] // a record whose queue is Redrive's events topic
	b.seed(t, rec{queue: "orders"}, rec{queue: "orders"})

	for _, id := range []string{garbage, own} {
		r := b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry", map[string]any{}, nil)
		wantError(t, "retry "+id, r, http.StatusConflict, "conflict", "override.queue")
		r = b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry", map[string]any{"override": map[string]any{"queue": dlqTopic}}, nil)
		wantError(t, "retry into the DLQ", r, http.StatusUnprocessableEntity, "validation_error", "override.queue")
		r = b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry", map[string]any{"override": map[string]any{"queue": dlqTopic + ".archive"}}, nil)
		wantError(t, "retry into the archive", r, http.StatusUnprocessableEntity, "validation_error", "override.queue")
	}
	if n := b.count(t, "state <> 'discarded'"); n != 0 {
		t.Fatalf("%d records changed by refused retries", n)
	}

	// Bulk: the dry run counts them as skipped, and the task leaves them alone.
	b.retryAll(t, 2, 2)
	if n := b.count(t, "state = 'discarded' AND id IN ($1, $2)", garbage, own); n != 2 {
		t.Errorf("the bulk retry touched %d of the records with no topic", 2-n)
	}
	if n := b.count(t, "queue = 'orders' AND state <> 'discarded'"); n != 2 {
		t.Errorf("%d orders records retried, want 2", n)
	}

	// With a real target topic, the unparseable record can be retried.
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+garbage+"/retry",
		map[string]any{"override": map[string]any{"queue": "orders.retry"}}, nil), http.StatusOK)
}
