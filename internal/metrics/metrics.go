// Package metrics defines Redrive's Prometheus metrics. Components receive the
// collectors they update; the HTTP server exposes the registry at /metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds every collector Redrive exports.
type Metrics struct {
	Registry *prometheus.Registry

	// Labels bounds every label value (queues, types, rules, topics): set
	// its limit and what operators declared before recording anything.
	Labels *Labels

	// IngestRecords counts DLQ records stored, by DLQ topic and decoded format.
	IngestRecords *CounterVec
	// IngestDuplicates counts DLQ records consumed again and skipped.
	IngestDuplicates *CounterVec
	// IngestBatchSeconds is the time from poll to committed offsets, per batch.
	IngestBatchSeconds prometheus.Histogram
	// IngestBatchRecords is the number of records per ingest batch.
	IngestBatchRecords prometheus.Histogram
	// IngestWriteErrors counts failed attempts to persist a batch.
	IngestWriteErrors prometheus.Counter
	// IngestPaused is 1 while ingest waits for Postgres to come back.
	IngestPaused prometheus.Gauge

	// DeadLetter and Events are the dead-letter (OJS §11.2) and event metrics.
	DeadLetter *DeadLetter
	Events     *Events
	// Redelivery holds the scheduler's and the repeat-failure metrics.
	Redelivery *Redelivery
	// Schema holds the Schema Registry decoding metrics.
	Schema *Schema
	// Rules holds the metrics of the ingest-side rules (capacity, access, filters).
	Rules *IngestRules
}

// Or returns m, or a private set (New) when m is nil (for config defaults).
func Or(m *Metrics) *Metrics {
	if m == nil {
		return New()
	}
	return m
}

// New creates the collectors and registers them, with Go and process
// collectors, on a fresh registry.
func New() *Metrics {
	l := NewLabels(0)
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Labels:   l,
		IngestRecords: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_ingest_records_total",
			Help: "DLQ records stored in Postgres, by DLQ topic and decoded format.",
		}, []string{"dlq_topic", "format"}, l.Topic, enum()),
		IngestDuplicates: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_ingest_duplicates_total",
			Help: "DLQ records consumed again (after a crash or rebalance) and skipped because they were already stored.",
		}, []string{"dlq_topic"}, l.Topic),
		IngestBatchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_ingest_batch_duration_seconds",
			Help:    "Time to decode, persist and commit one ingest batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		IngestBatchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_ingest_batch_records",
			Help:    "Records per ingest batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
		IngestWriteErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_ingest_write_errors_total",
			Help: "Failed attempts to persist an ingest batch; the batch is retried, never dropped.",
		}),
		IngestPaused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "redrive_ingest_paused",
			Help: "1 while ingest is paused waiting for Postgres, else 0.",
		}),
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.IngestRecords, m.IngestDuplicates, m.IngestBatchSeconds, m.IngestBatchRecords,
		m.IngestWriteErrors, m.IngestPaused,
	)
	m.DeadLetter, m.Events = newDeadLetter(m.Registry, nil, l), NewEvents(m.Registry)
	m.Redelivery = newRedelivery(m.Registry, l)
	m.Schema = newSchema(m.Registry)
	m.Rules = newIngestRules(m.Registry, l)
	return m
}
