package redrive

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

// DefaultDLQTopic is the DLQ topic Redrive reads by default.
const DefaultDLQTopic = "dead_letter_queue"

// Opt configures a DeadLetterer.
type Opt interface{ apply(*cfg) }

type opt func(*cfg)

func (o opt) apply(c *cfg) { o(c) }

type cfg struct {
	dlqTopic   string
	group      string
	groupSet   bool
	retries    int
	backoff    time.Duration
	logger     *slog.Logger
	recordType func(*kgo.Record) string
	now        func() time.Time
	ack        bool
	flood      *FloodGuardConfig
	registerer prometheus.Registerer
	tracer     trace.TracerProvider
}

// DLQTopic sets the topic failed records are produced to, overriding the
// default DefaultDLQTopic ("dead_letter_queue").
func DLQTopic(topic string) Opt { return opt(func(c *cfg) { c.dlqTopic = topic }) }

// Group sets the consumer group written as redrive.source.group, overriding
// the default: the client's kgo.ConsumerGroup, if any.
func Group(group string) Opt {
	return opt(func(c *cfg) { c.group, c.groupSet = group, true })
}

// InlineRetries makes Wrap call the handler up to n more times, sleeping
// backoff before each, before it dead-letters a record. Only retryable
// failures (CodeRetry, the default) are retried inline; DISCARD, DEAD_LETTER
// and FAIL are dead-lettered at once. Inline retries hold up the partition, so
// keep n and backoff small (say 2 and 100ms): Redrive's own retries are for
// long waits. The default is no inline retries.
func InlineRetries(n int, backoff time.Duration) Opt {
	return opt(func(c *cfg) { c.retries, c.backoff = n, backoff })
}

// Logger sets the logger; the default discards everything. A dead-lettered
// record is logged at Warn, a failed publish at Error, an inline retry at Debug.
func Logger(l *slog.Logger) Opt { return opt(func(c *cfg) { c.logger = l }) }

// RecordType sets a function that names a record's job or event type
// (redrive.type), which policies can match. Without it, Redrive falls back to
// the record's "type" or "ce_type" header when it ingests the failure.
func RecordType(fn func(*kgo.Record) string) Opt {
	return opt(func(c *cfg) { c.recordType = fn })
}

// AckCompletions makes Wrap report success of records Redrive redelivered
// (those carrying redrive.id and redrive.attempt): it produces a small
// acknowledgement to the DLQ topic, and Redrive marks the record completed
// by it. Topics whose policy says completion: ack need it; under the default,
// completion: redelivered, Redrive completes a record when it produces the
// redelivery, and an acknowledgement only confirms it. The acknowledgement is
// sent asynchronously and best-effort: if it is lost the record keeps waiting
// (and is marked unacknowledged after the topic's ack_timeout under
// completion: ack), and the handler's success is never turned into a
// failure. Off by default.
func AckCompletions() Opt { return opt(func(c *cfg) { c.ack = true }) }

// Registerer registers the DeadLetterer's metrics with reg:
// redrive_client_redeliveries_skipped_total, the redeliveries Wrap skipped
// because they were for another consumer group (see Wrap), labelled with the
// DLQ topic and the consumer group. Without it nothing is registered.
func Registerer(reg prometheus.Registerer) Opt {
	return opt(func(c *cfg) { c.registerer = reg })
}

// TracerProvider sets the OpenTelemetry tracer provider of the dead-letter
// publish span (see Publish). The default is the global provider
// (otel.GetTracerProvider), a no-op until the application sets one.
func TracerProvider(tp trace.TracerProvider) Opt {
	return opt(func(c *cfg) { c.tracer = tp })
}
