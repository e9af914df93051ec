package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
)

// A redelivery.target_topic naming a topic Redrive must never produce to is
// refused, the error naming the field: a Kafka internal topic by every check
// (file or API), one of Redrive's own topics by the checks that know them (the
// Watcher of the policy directory, an API config checked with CheckTargets).
func TestTargetTopicMayNotNameAReservedTopic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "topics:\n  orders:\n    redelivery: {target_topic: __consumer_offsets}\n")
	_, err := LoadDir(dir)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `topics.orders.redelivery.target_topic: "__consumer_offsets" is a Kafka internal topic`) {
		t.Fatalf("LoadDir = %v; want target_topic refused as a Kafka internal topic", err)
	}
	if _, err := DecodeTopicSpec([]byte(`{"redelivery":{"target_topic":"__transaction_state"}}`)); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "redelivery.target_topic") || !strings.Contains(err.Error(), "internal") {
		t.Fatalf("DecodeTopicSpec = %v; want target_topic refused as a Kafka internal topic", err)
	}

	reserved := dlq.NewReservedTopics("dead_letter_queue", "dead_letter_queue.archive", "dead_letter_queue.events")
	writeFile(t, dir, "_default: {}\ntopics:\n  orders:\n    types:\n      refund:\n        redelivery: {target_topic: dead_letter_queue}\n"+
		"  payments:\n    redelivery: {target_topic: dead_letter_queue.events}\n  audit:\n    redelivery: {target_topic: audit.replay}\n")
	if _, err := NewWatcher(dir, dlq.ReservedTopics{}, nil); err != nil {
		t.Fatalf("without reserved topics the file is fine: %v", err)
	}
	_, err = NewWatcher(dir, reserved, nil)
	for _, want := range []string{
		`p.yaml: topics.orders.types.refund.redelivery.target_topic: "dead_letter_queue" is one of Redrive's own topics (DLQ, archive or events); name the topic a consumer reads (line 6)`,
		`p.yaml: topics.payments.redelivery.target_topic: "dead_letter_queue.events" is one of Redrive's own topics`,
	} {
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("NewWatcher = %v; want %s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "audit") {
		t.Errorf("NewWatcher = %v; audit.replay is a fine target", err)
	}

	spec, err := DecodeTopicSpec([]byte(`{"redelivery":{"target_topic":"dead_letter_queue.archive"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.CheckTargets(reserved); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `redelivery.target_topic: "dead_letter_queue.archive" is one of Redrive's own topics`) {
		t.Fatalf("CheckTargets = %v; want the archive topic refused", err)
	}
}
