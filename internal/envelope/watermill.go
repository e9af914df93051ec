package envelope

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
)

// Watermill poison-queue middleware metadata, which its Kafka marshaler writes
// as record headers.
const (
	watermillTopic      = "topic_poisoned"
	watermillHandler    = "handler_poisoned"
	watermillSubscriber = "subscriber_poisoned"
	watermillReason     = "reason_poisoned"
)

// decodeWatermill reads a record from Watermill's poison queue. It needs
// topic_poisoned. The reason is the error message; Watermill carries no error
// type, partition or offset. Details keeps handler and subscriber.
func decodeWatermill(h headers, rec *kgo.Record, f *dlq.Failure) bool {
	topic := h.name(watermillTopic)
	if topic == "" {
		return false
	}
	f.Source = dlq.Source{Topic: topic, Partition: -1, Offset: -1}
	f.Error.Message = h.text(watermillReason)
	f.Error.Details = details(
		"handler", h.name(watermillHandler),
		"subscriber", h.name(watermillSubscriber),
	)
	f.Headers = copyHeaders(rec.Headers, func(key string) bool {
		switch key {
		case watermillTopic, watermillHandler, watermillSubscriber, watermillReason:
			return true
		}
		return withoutPrefixes()(key)
	})
	return true
}
