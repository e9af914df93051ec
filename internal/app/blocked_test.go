package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/testdate"
)

// TestBlockedQueueAndArchiveStateShowInTheAPI: a record whose source topic
// does not exist fails on its own, and the API says so on the record and on
// its queue; a dead letter's archive copy shows as done once the archiver
// made it (serve created the archive topic itself).
func TestBlockedQueueAndArchiveStateShowInTheAPI(t *testing.T) {
	t.Parallel()
	policies := policyDir(t, "topics:\n  ghost: {retry: {initial_interval: PT0.1S, jitter: false}}\n")
	brokers := kafkatest.New(t, dlqTopic, "orders") // no "ghost", no archive topic, no auto-creation
	b := start(t, brokers, nil, "REDRIVE_POLICIES_DIR", policies, "REDRIVE_RETRY_MIN_INTERVAL", "100ms")
	m := &mApp{base: b.base}
	now := testdate.Now()
	kafkatest.Produce(t, kafkatest.Client(t, brokers),
		failure(now, "ghost", "t", "db.down", dlq.CodeRetry, "g1"),
		failure(now, "orders", "t", "db.down", dlq.CodeDeadLetter, "o1"))

	type failureJSON struct {
		Reason   string `json:"reason"`
		Message  string `json:"message"`
		Failures int    `json:"failures"`
	}
	var rec struct {
		Items []struct {
			State             string       `json:"state"`
			Attempt           int          `json:"attempt"`
			RedeliveryFailure *failureJSON `json:"redelivery_failure"`
			Archive           *struct {
				State      string  `json:"state"`
				ArchivedAt *string `json:"archived_at"`
			} `json:"archive"`
		} `json:"items"`
	}
	eventually.True(t, "the ghost record's redelivery failure", func() bool {
		rec.Items = nil
		return b.get(t, "/ojs/v1/dead-letter?queue=ghost", &rec) == http.StatusOK && len(rec.Items) == 1 &&
			rec.Items[0].RedeliveryFailure != nil
	})
	if g := rec.Items[0]; g.State != "retryable" || g.Attempt != 1 || g.RedeliveryFailure.Reason != "unknown_topic" ||
		g.RedeliveryFailure.Message == "" || g.Archive != nil {
		t.Fatalf("ghost record: %+v failure %+v", g, g.RedeliveryFailure)
	}

	var q struct {
		Delivery struct {
			State          string  `json:"state"`
			BlockedRecords int     `json:"blocked_records"`
			Reason         *string `json:"reason"`
			Since          *string `json:"since"`
		} `json:"delivery"`
	}
	if b.get(t, "/ojs/v1/queues/ghost", &q) != http.StatusOK || q.Delivery.State != "blocked" || q.Delivery.BlockedRecords != 1 ||
		q.Delivery.Reason == nil || *q.Delivery.Reason != "unknown_topic" || q.Delivery.Since == nil {
		t.Fatalf("GET /queues/ghost delivery = %+v, want blocked by 1 record, unknown_topic", q.Delivery)
	}
	var all struct {
		Items []struct {
			Name     string `json:"name"`
			Delivery struct {
				State          string `json:"state"`
				BlockedRecords int    `json:"blocked_records"`
			} `json:"delivery"`
		} `json:"items"`
	}
	b.get(t, "/ojs/v1/queues", &all)
	got := map[string]string{}
	for _, it := range all.Items {
		got[it.Name] = it.Delivery.State
		if it.Name == "ghost" && it.Delivery.BlockedRecords != 1 {
			t.Errorf("ghost lists %d blocked records, want 1", it.Delivery.BlockedRecords)
		}
	}
	if got["ghost"] != "blocked" || got["orders"] != "ok" {
		t.Fatalf("GET /queues delivery states %v, want ghost blocked and orders ok", got)
	}
	if v := m.metric(t, `redrive_redelivery_failures_total{queue="ghost",reason="unknown_topic"}`); v < 1 {
		t.Errorf("redrive_redelivery_failures_total for ghost = %v", v)
	}

	eventually.True(t, "the dead letter's archive copy", func() bool {
		rec.Items = nil
		return b.get(t, "/ojs/v1/dead-letter?queue=orders", &rec) == http.StatusOK && len(rec.Items) == 1 &&
			rec.Items[0].Archive != nil && rec.Items[0].Archive.State == "done"
	})
	if a := rec.Items[0].Archive; a.ArchivedAt == nil {
		t.Fatalf("archive = %+v, want archived_at", a)
	}
	kafkatest.Consume(t, brokers, dlqTopic+".archive", 1, 10*time.Second)
}
