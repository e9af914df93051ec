package queue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
)

// An API config whose redelivery.target_topic names one of Redrive's own
// topics is refused as an invalid policy naming the field.
func TestAPIConfigMayNotTargetRedrivesOwnTopics(t *testing.T) {
	t.Parallel()
	r := queue.New(nil, nil, nil)
	r.Reserve(dlq.NewReservedTopics("dead_letter_queue", "dead_letter_queue.archive", "dead_letter_queue.events"))
	spec, err := policy.DecodeTopicSpec([]byte(`{"redelivery":{"target_topic":"dead_letter_queue"}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Validate("orders", spec)
	if !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), `redelivery.target_topic: "dead_letter_queue" is one of Redrive's own topics`) {
		t.Fatalf("Validate = %v; want target_topic refused", err)
	}
	ok, _ := policy.DecodeTopicSpec([]byte(`{"redelivery":{"target_topic":"orders.replay"}}`))
	if err := r.Validate("orders", ok); err != nil {
		t.Fatalf("Validate of a fine target = %v", err)
	}
}
