package ingest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// TestNewFailuresFollowTheTopicPolicy checks the decisions ingest makes for
// first failures: the policy file, the handler's code, max_age, the topic's
// state and a record's own redrive.retry header all count.
func TestNewFailuresFollowTheTopicPolicy(t *testing.T) {
	b := setup(t)
	dir := t.TempDir()
	err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(`
_default:
  retry: {max_attempts: 4, initial_interval: PT30S, jitter: false, on_exhaustion: dead_letter,
          non_retryable_errors: ["validation.*"]}
topics:
  old: {max_age: PT1H}
  closing: {state: draining}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	in, err := ingest.New(ingest.Config{Brokers: b.brokers, Group: "g", Policies: set, ClientOpts: kafkatest.ClientOpts(b.brokers)}, b.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := in.Stop(); err != nil {
			t.Errorf("stopping: %v", err)
		}
	})

	now := testdate.Now()
	fail := func(topic, errType string, code dlq.Code, failedAt time.Time, retry string) *kgo.Record {
		return envelope.Encode(&kgo.Record{Topic: topic, Value: []byte("v")}, envelope.FailureInfo{
			DLQTopic: dlqTopic, ErrorType: errType, Code: code, FailedAt: failedAt, Retry: []byte(retry)})
	}
	kafkatest.Produce(t, b.cl,
		fail("plain", "db.down", dlq.CodeRetry, now, ""),
		fail("invalid", "validation.email", dlq.CodeRetry, now, ""),
		fail("coded", "db.down", dlq.CodeDeadLetter, now, ""),
		fail("old", "db.down", dlq.CodeRetry, now.Add(-2*time.Hour), ""),
		fail("closing", "db.down", dlq.CodeRetry, now, ""),
		fail("override", "db.down", dlq.CodeRetry, now, `{"max_attempts":1,"on_exhaustion":"discard"}`),
	)
	waitForCount(t, b.store, 6)

	for queue, want := range map[string]struct {
		state       dlq.State
		exhaustion  dlq.Exhaustion
		maxAttempts int
	}{
		"plain":    {dlq.StateRetryable, "", 4},
		"invalid":  {dlq.StateDiscarded, dlq.ExhaustionDeadLetter, 4}, // non-retryable error type
		"coded":    {dlq.StateDiscarded, dlq.ExhaustionDeadLetter, 4}, // DEAD_LETTER from the handler
		"old":      {dlq.StateDiscarded, dlq.ExhaustionDeadLetter, 4}, // older than max_age
		"closing":  {dlq.StateDiscarded, dlq.ExhaustionDeadLetter, 4}, // draining topics take no new retries
		"override": {dlq.StateDiscarded, dlq.ExhaustionDiscard, 1},    // the record's redrive.retry header
	} {
		page, err := b.store.List(context.Background(), &store.ListParams{Filter: filter.Filter{Queue: queue}, Limit: 1})
		if err != nil || len(page.Records) != 1 {
			t.Fatalf("%s: %v", queue, err)
		}
		r := page.Records[0]
		if r.State != want.state || r.Exhaustion != want.exhaustion || r.MaxAttempts != want.maxAttempts {
			t.Errorf("%s: %s/%q max_attempts %d; want %s/%q %d", queue, r.State, r.Exhaustion, r.MaxAttempts,
				want.state, want.exhaustion, want.maxAttempts)
		}
		if want.state == dlq.StateRetryable && r.NextRetryAt.Sub(r.Errors[0].OccurredAt) != 30*time.Second {
			t.Errorf("%s: next retry %v after the failure, want 30s", queue, r.NextRetryAt.Sub(r.Errors[0].OccurredAt))
		}
	}
}
