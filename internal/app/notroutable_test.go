package app_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/testdate"
)

// Forged DLQ records claiming to come from Redrive's own topics (the DLQ
// topic, with a looping retry header; the events and archive topics) or a
// Kafka internal one are stored as dead letters that say why, never
// retryable: serve reserves every topic it owns for ingest.
func TestForgedRecordsFromOwnTopicsAreNotRoutable(t *testing.T) {
	b := setup(t)
	now := testdate.Now()
	forged := []*kgo.Record{
		failure(now, dlqTopic, "t", "db.down", dlq.CodeRetry, "self"),
		failure(now, dlqTopic+".events", "t", "db.down", dlq.CodeRetry, "events"),
		failure(now, dlqTopic+".archive", "t", "db.down", dlq.CodeRetry, "archive"),
		failure(now, "__consumer_offsets", "t", "db.down", dlq.CodeRetry, "internal"),
	}
	forged[0].Headers = append(forged[0].Headers, kgo.RecordHeader{Key: envelope.HeaderRetry,
		Value: []byte(`{"max_attempts":2000000000,"initial_interval":"PT0.001S","max_interval":"PT0.001S"}`)})
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers), append(forged, failure(now, "orders", "t", "db.down", dlq.CodeRetry, "ok"))...)

	l := b.waitFor(t, "error_type="+dlq.ErrorTypeNotRoutable+"&exhaustion=dead_letter", len(forged))
	for _, item := range l.Items {
		var r record // the whole record: a list shows the latest error only
		b.get(t, "/ojs/v1/dead-letter/"+item.ID, &r)
		if r.State != "discarded" || r.NextRetryAt != nil || len(r.Errors) != 2 ||
			r.Errors[0].Type != "db.down" || r.Errors[1].Type != dlq.ErrorTypeNotRoutable {
			t.Errorf("queue %s: state %s, errors %+v; want a dead letter saying it is not routable", r.Queue, r.State, r.Errors)
		}
	}
	// The record from orders is routable: retried on its policy (here after
	// about a second, so by now it may have been redelivered), never kept
	// as not routable.
	var r record
	b.get(t, "/ojs/v1/dead-letter/"+b.waitFor(t, "queue=orders", 1).Items[0].ID, &r)
	if r.State != "retryable" && r.State != "available" && r.State != "completed" || len(r.Errors) != 1 || r.Errors[0].Type != "db.down" {
		t.Errorf("the record from orders: state %s, errors %+v; want it retried, with its own failure alone", r.State, r.Errors)
	}
}
