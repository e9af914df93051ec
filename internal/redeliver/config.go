package redeliver

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/tracing"
)

// Config configures a Scheduler. Zero fields take the defaults noted.
type Config struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// ClientOpts are extra franz-go options (TLS, SASL, tuning).
	ClientOpts []kgo.Opt
	// Policies resolves each queue's state (paused topics are skipped) and
	// redelivery settings (rate limit, target topic, keep partition).
	// Default: system defaults for every topic.
	Policies policy.Resolver
	// Reserved are the topics no redelivery is ever produced to: Redrive's
	// own (DLQ, archive, events) and Kafka's internal ones. A record whose
	// target is one of them is kept as a dead letter, not routable. Default:
	// the zero value, which reserves Kafka's internal topics only.
	Reserved dlq.ReservedTopics
	// BatchSize is the most records claimed per queue per claim. Default:
	// DefaultBatchSize.
	BatchSize int
	// BatchBytes bounds the keys and values of one claim: it takes records
	// while those before them add up to less, so a batch holds at most
	// BatchBytes and one more record (at least one). With MaxInFlight it
	// bounds the memory of the batches in flight whatever the records' size.
	// Default: DefaultBatchBytes.
	BatchBytes int64
	// Workers is how many claim loops run at once; SKIP LOCKED keeps them
	// apart. Up to two batches of one queue per worker are in flight, so
	// claiming the next batch overlaps producing the last. Default: 2.
	Workers int
	// MaxInFlight bounds the claimed batches being produced at once, over all
	// queues (memory). Default: 4 × Workers.
	MaxInFlight int
	// Lease is how long a claim lasts, from the time of the claim on Clock:
	// a claim its scheduler has not settled by then (it died, or Postgres
	// was unreachable) is rescued by the next pass of any scheduler and its
	// records are redelivered again. Must exceed twice ProduceTimeout: a
	// batch whose topic was deleted and created again is produced a second
	// time within the same claim. Default: 30s.
	Lease time.Duration
	// ProduceTimeout bounds one produce: a record that cannot be delivered
	// fails within it, and its batch is settled. Default: 5s.
	ProduceTimeout time.Duration
	// PollInterval is the longest the scheduler sleeps; Wake and due times cut
	// it short. It bounds how soon records written by another replica (or
	// directly in the database) are noticed. Default: 1s.
	PollInterval time.Duration
	// FailureBackoff is how long a record whose produce failed waits before
	// it is tried again, growing with each failure in a row. It does not use
	// up the record's retry policy attempts. Default: 5s doubling to 10m.
	FailureBackoff Backoff
	// ParkBackoff is how long a target topic whose produce fails for a
	// reason of the topic stays parked between probes (park.go): from Min,
	// doubling per failed probe up to Max. Default: 5s to 1m.
	ParkBackoff Backoff
	// Owner names this scheduler in its claims. Default: hostname/pid/random.
	Owner string
	// Clock is the time of claims, leases and due records, and what the
	// scheduler waits on. Default: clock.Wall.
	Clock clock.Clock
	// Logger logs. Default: slog.Default().
	Logger *slog.Logger
	// Metrics receives the redelivery metrics. Default: a private set.
	Metrics *metrics.Metrics
	// Tracer starts a span for each redelivery of a record that carries a
	// trace context. Default: nil, tracing off.
	Tracer *tracing.Tracer
}

// DefaultBatchSize is the most records the scheduler claims at once of one
// queue, unless Config.BatchSize says otherwise. Each claim costs the same
// few statements and round trips (the claim, its planning, the settle, the
// activity row) and one scan of the due index, however many records it
// takes: claims of 1,000 instead of 500 cut the scheduler's CPU per record
// by about a sixth (docs/performance.md, "Workers and batches"). A batch
// in flight holds its records' keys, values and headers, so larger ones cost
// memory.
const DefaultBatchSize = 1000

// DefaultBatchBytes bounds one claim's keys and values unless
// Config.BatchBytes says otherwise: 8 MiB, so the default eight batches in
// flight hold about 64 MiB of them at most. Claims of 1,000 records of up
// to about 8 KiB are never cut.
const DefaultBatchBytes = 8 << 20

// ArchiveSuffix is appended to a DLQ topic to name its default archive topic.
const ArchiveSuffix = ".archive"

// DefaultArchiveTopic names "<dlq topic>.archive".
func DefaultArchiveTopic(dlqTopic string) string { return dlqTopic + ArchiveSuffix }

// defaultOwner names this process in leases.
func defaultOwner() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", h, os.Getpid(), uuid.NewString()[:8])
}

func (c Config) withDefaults() Config {
	if c.Policies == nil {
		c.Policies = (*policy.Set)(nil)
	}
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.BatchBytes = cmp.Or(c.BatchBytes, DefaultBatchBytes)
	c.Workers = cmp.Or(c.Workers, 2)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, 4*c.Workers)
	c.Lease = cmp.Or(c.Lease, 30*time.Second)
	c.ProduceTimeout = cmp.Or(c.ProduceTimeout, 5*time.Second)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.FailureBackoff = c.FailureBackoff.withDefaults()
	if c.ParkBackoff.Min <= 0 {
		c.ParkBackoff.Min = parkMin
	}
	if c.ParkBackoff.Max <= 0 {
		c.ParkBackoff.Max = parkMax
	}
	c.ParkBackoff.Max = max(c.ParkBackoff.Max, c.ParkBackoff.Min)
	if c.Owner == "" {
		c.Owner = defaultOwner()
	}
	c.Clock = clock.Or(c.Clock)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Metrics = metrics.Or(c.Metrics)
	return c
}

func (c Config) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("redeliver: Brokers is required")
	}
	if c.BatchSize < 1 || c.BatchBytes < 1 || c.Workers < 1 || c.MaxInFlight < 1 {
		return errors.New("redeliver: BatchSize, BatchBytes, Workers and MaxInFlight must be >= 1")
	}
	if c.Lease <= 2*c.ProduceTimeout {
		return fmt.Errorf("redeliver: Lease (%s) must exceed twice ProduceTimeout (%s), or claims expire while they are produced", c.Lease, c.ProduceTimeout)
	}
	return nil
}

// ArchiverConfig configures an Archiver. Zero fields take the defaults noted.
type ArchiverConfig struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// ClientOpts are extra franz-go options (TLS, SASL, tuning).
	ClientOpts []kgo.Opt
	// Topic names the archive topic of a DLQ topic. Default: "<dlq topic>.archive".
	Topic func(dlqTopic string) string
	// DLQTopics are the DLQ topics whose archive topics CheckTopics watches
	// for being deleted and created again. Default: none (no checks).
	DLQTopics []string
	// TopicCheckInterval is how often the archiver checks its archive
	// topics (CheckTopics) on its own, besides before each prune and when a
	// copy finds its topic recreated. Default: 30s.
	TopicCheckInterval time.Duration
	// BatchSize is the most copies claimed at once. Default: 500.
	BatchSize int
	// Lease is how long a claim of copies lasts, from the time of the claim
	// on Clock; copies a dead archiver held are due again after it. Must
	// exceed twice ProduceTimeout: a copy may be produced twice within one
	// claim (again as a reference copy when too large). Default: 30s.
	Lease time.Duration
	// ProduceTimeout bounds one produce. Default: 5s.
	ProduceTimeout time.Duration
	// PollInterval is the longest the archiver sleeps; Wake cuts it short.
	// Default: 1s.
	PollInterval time.Duration
	// FailureBackoff is how long a copy whose produce failed waits before it
	// is tried again. Default: 5s doubling to 10m.
	FailureBackoff Backoff
	// Clock is the time of claims and due copies, and what the archiver
	// waits on. Default: clock.Wall.
	Clock clock.Clock
	// Logger logs. Default: slog.Default().
	Logger *slog.Logger
	// Metrics receives the archive metrics. Default: a private set.
	Metrics *metrics.Metrics
}

func (c ArchiverConfig) withDefaults() ArchiverConfig {
	if c.Topic == nil {
		c.Topic = DefaultArchiveTopic
	}
	c.BatchSize = cmp.Or(c.BatchSize, 500)
	c.Lease = cmp.Or(c.Lease, 30*time.Second)
	c.ProduceTimeout = cmp.Or(c.ProduceTimeout, 5*time.Second)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.TopicCheckInterval = cmp.Or(c.TopicCheckInterval, 30*time.Second)
	c.FailureBackoff = c.FailureBackoff.withDefaults()
	c.Clock = clock.Or(c.Clock)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Metrics = metrics.Or(c.Metrics)
	return c
}

func (c ArchiverConfig) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("archiver: Brokers is required")
	}
	if c.BatchSize < 1 {
		return errors.New("archiver: BatchSize must be >= 1")
	}
	if c.Lease <= 2*c.ProduceTimeout {
		return fmt.Errorf("archiver: Lease (%s) must exceed twice ProduceTimeout (%s)", c.Lease, c.ProduceTimeout)
	}
	return nil
}
