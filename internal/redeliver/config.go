package redeliver

import (
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/policy"
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
	// ArchiveTopic names the archive topic of a DLQ topic.
	// Default: "<dlq topic>.archive".
	ArchiveTopic func(dlqTopic string) string
	// ArchiveDisabled turns off copying discarded records to archive topics.
	ArchiveDisabled bool
	// BatchSize is the most records claimed per queue per claim. Default: 500.
	BatchSize int
	// Workers is how many claim loops run at once; SKIP LOCKED keeps them
	// apart. Default: 2.
	Workers int
	// Lease bounds how long a hung claim can hold its records before Postgres
	// ends its session and they are due again. Default: 60s.
	Lease time.Duration
	// PollInterval is the longest the scheduler sleeps; Wake and due times cut
	// it short. It bounds how soon records written by another replica (or
	// directly in the database) are noticed. Default: 1s.
	PollInterval time.Duration
	// RetryBackoff is how long a record whose produce failed waits. Default: 5s.
	RetryBackoff time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Logger logs. Default: slog.Default().
	Logger *slog.Logger
	// Metrics receives the redelivery metrics. Default: a private set.
	Metrics *metrics.Metrics
}

// ArchiveSuffix is appended to a DLQ topic to name its default archive topic.
const ArchiveSuffix = ".archive"

// DefaultArchiveTopic names "<dlq topic>.archive".
func DefaultArchiveTopic(dlqTopic string) string { return dlqTopic + ArchiveSuffix }

func (c Config) withDefaults() Config {
	if c.Policies == nil {
		c.Policies = (*policy.Set)(nil)
	}
	if c.ArchiveTopic == nil {
		c.ArchiveTopic = DefaultArchiveTopic
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Lease == 0 {
		c.Lease = 60 * time.Second
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New()
	}
	return c
}

func (c Config) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("redeliver: Brokers is required")
	}
	if c.BatchSize < 1 || c.Workers < 1 {
		return errors.New("redeliver: BatchSize and Workers must be >= 1")
	}
	return nil
}
