// Package records is the one owner of a dead-letter record's transitions: a
// single retry (with an operator's override of the value, headers, target
// topic or retry policy), a delete, bulk retries and purges (their dry-run
// counts and the tasks that carry them out), the compatibility requeue and
// clear, and replay by rule. It applies the routing rules every transition
// shares — above all that a record of Redrive's own topics (or Kafka's
// internal ones) has no topic to go back to (route.go) — and
// emits the lifecycle events the transitions produce.
//
// It is also the read side the HTTP API renders (Reads): lists, stats,
// tasks, incidents, activity, the audit log, queue and replay-rule configs.
// Callers never import internal/store for either; types.go names the store's
// row types they render.
package records

import (
	"errors"
	"log/slog"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/tracing"
)

// Config configures a Service. Zero fields take the defaults noted.
type Config struct {
	// Store is required.
	Store *store.Store
	// Reserved are the topics no redelivery may go to: Redrive's own (DLQ,
	// archive, events) and Kafka's internal ones. Records of a reserved
	// queue (unparseable ones among them) have no topic to go back to:
	// retrying one needs a target topic, and bulk retries and replays skip
	// them. The zero value reserves the internal topics only.
	Reserved dlq.ReservedTopics
	// Queues resolves a queue's policy (a retry override is merged onto
	// it). Default: the system defaults with no files, over Store's API
	// configs.
	Queues *queue.Resolver
	// Events publishes the lifecycle events of transitions
	// (dead_letter.retried, .deleted). Nil: nothing is published.
	Events *events.Publisher
	// Wake asks the scheduler to redeliver due records now. Optional.
	Wake func()
	// KickTasks tells the task runner a task was created. Optional.
	KickTasks func()
	// Schemas encodes edited payloads of Schema Registry records
	// (override.payload, bulk patches) and decodes them for patches. Nil
	// (no registry configured): a schema-encoded record's payload cannot be
	// edited, JSON records' can.
	Schemas *schema.Registry
	Logger  *slog.Logger
	// Tracer starts the spans of an operator's retry and of a bulk retry's
	// records, for records that carry a trace context. Nil: tracing off.
	Tracer *tracing.Tracer
	// JobMetrics receives the OJS observability metrics of the worker
	// API's jobs (ojs_job_*, ojs-observability §8); Tracer records their
	// enqueue and process spans (§6). Nil: no job metrics.
	JobMetrics *metrics.OJS
	// Exports caps the exports running at once (BeginExport). Default:
	// NewExportSlots(DefaultExportsMax, DefaultExportsMaxPerOwner).
	Exports *ExportSlots
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Queues == nil {
		c.Queues = queue.New(func() *policy.Set { return nil }, c.Store, c.Logger)
	}
	if c.Wake == nil {
		c.Wake = func() {}
	}
	if c.KickTasks == nil {
		c.KickTasks = func() {}
	}
	if c.Exports == nil {
		c.Exports = NewExportSlots(0, 0)
	}
	return c
}

// Service owns record transitions; see the package doc.
type Service struct {
	cfg   Config
	store *store.Store
	log   *slog.Logger
}

// New returns a Service over cfg.Store.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("records: Store is required")
	}
	cfg = cfg.withDefaults()
	return &Service{cfg: cfg, store: cfg.Store, log: cfg.Logger.With("component", "records")}, nil
}

// Queues is the resolver the Service judges queues' policies by.
func (s *Service) Queues() *queue.Resolver { return s.cfg.Queues }

// Wake asks the scheduler to redeliver due records now (after a queue was
// resumed or re-targeted, say).
func (s *Service) Wake() { s.cfg.Wake() }
