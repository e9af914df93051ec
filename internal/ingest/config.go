package ingest

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/tracing"
)

// Config configures an Ingester. Zero fields take the defaults noted.
type Config struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Topics are the DLQ topics to consume. Default: ["dead_letter_queue"].
	Topics []string
	// Group is the consumer group. Default: "redrive".
	Group string
	// BatchSize is the most records persisted in one batch. Default: 5000.
	BatchSize int
	// Policies resolves the effective policy of a source topic and record type.
	// Default: the system defaults for everything.
	Policies policy.Resolver
	// Reserved are the topics a failure may not be redelivered to (Redrive's
	// own DLQ, archive and events topics, Kafka's internal topics, illegal
	// names): a new failure from one is stored as a dead letter, not routable.
	// Default: the DLQ topics consumed (Topics) and Kafka's internal topics.
	Reserved dlq.ReservedTopics
	// RetryLimits bound every retry policy a new failure gets: a record's
	// redrive.retry header is clamped into them. Default: policy.DefaultLimits.
	RetryLimits policy.Limits
	// Environment is REDRIVE_ENVIRONMENT: an ingest filter with when_env
	// applies only where one of its globs matches it. Default: "" (no
	// filter with when_env applies).
	Environment string
	// WarnEvery is how often one kind of warning about a record's content (an
	// invalid or clamped redrive.retry header, a degraded record) is logged at
	// most; the rest are counted in the next. Default: 1m.
	WarnEvery time.Duration
	// Wake is called when a batch leaves records waiting for redelivery, so
	// the scheduler looks at once. Optional.
	Wake func()
	// Schemas, when set, decodes values and keys in the Schema Registry
	// wire format with the schemas it holds in memory, never waiting on the
	// registry: a record whose schema it does not hold yet is stored raw and
	// marked pending (see DecodePending). Optional.
	Schemas *schema.Registry
	// DecodePending is called when a stored batch left records waiting for
	// their schema, so the background decoder fetches it. Optional.
	DecodePending func()
	// Events receives dead_letter.added events. Optional.
	Events *events.Publisher
	// RetryBackoff bounds the wait between attempts to persist a batch while
	// Postgres is unreachable. Default: 100ms growing to 5s.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// ClientOpts are extra franz-go options (TLS, SASL, tuning).
	ClientOpts []kgo.Opt
	// TopicCheckInterval is how often the brokers are asked for the DLQ
	// topics' ids, so that a topic deleted and created again is taken up anew
	// even before its fetches fail. Default: 5s.
	TopicCheckInterval time.Duration
	// Clock is the time records are stored at and what ingest waits on
	// (backoffs, topic checks). Default: clock.Wall.
	Clock clock.Clock
	// Rand returns a uniform sample in [0, 1) for jitter. Default: math/rand/v2.
	Rand func() float64
	// Logger logs. Default: slog.Default().
	Logger *slog.Logger
	// Metrics receives ingest metrics. Default: a private, unexported set.
	Metrics *metrics.Metrics
	// Tracer records a span for each DLQ record that carries a trace
	// context, from its poll to its commit. Default: nil, tracing off.
	Tracer *tracing.Tracer
}

// DefaultTopic is the DLQ topic consumed when none is configured.
const DefaultTopic = "dead_letter_queue"

func (c Config) withDefaults() Config {
	if len(c.Topics) == 0 {
		c.Topics = []string{DefaultTopic}
	}
	c.Group = cmp.Or(c.Group, "redrive")
	c.BatchSize = cmp.Or(c.BatchSize, 5000)
	if c.Policies == nil {
		c.Policies = (*policy.Set)(nil)
	}
	if len(c.Reserved.Names()) == 0 {
		c.Reserved = dlq.NewReservedTopics(c.Topics...)
	}
	c.RetryLimits = c.RetryLimits.WithDefaults()
	c.WarnEvery = cmp.Or(c.WarnEvery, time.Minute)
	c.RetryBackoffMin = cmp.Or(c.RetryBackoffMin, 100*time.Millisecond)
	c.RetryBackoffMax = cmp.Or(c.RetryBackoffMax, 5*time.Second)
	if c.TopicCheckInterval <= 0 {
		c.TopicCheckInterval = 5 * time.Second
	}
	c.Clock = clock.Or(c.Clock)
	if c.Rand == nil {
		c.Rand = randFloat
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Metrics = metrics.Or(c.Metrics)
	return c
}

func (c Config) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("ingest: Brokers is required")
	}
	if c.BatchSize < 1 {
		return errors.New("ingest: BatchSize must be >= 1")
	}
	if c.RetryBackoffMin > c.RetryBackoffMax {
		return errors.New("ingest: RetryBackoffMin must not exceed RetryBackoffMax")
	}
	if err := c.RetryLimits.Validate(); err != nil {
		return fmt.Errorf("ingest: RetryLimits: %w", err)
	}
	return nil
}
