package metrics

import "github.com/prometheus/client_golang/prometheus"

// Redelivery holds the scheduler's metrics.
type Redelivery struct {
	// Redelivered counts records produced back to a topic, by queue.
	Redelivered *CounterVec
	// Failures counts redeliveries whose produce failed (retried after the
	// record's own backoff), by queue and reason; not_routable counts records
	// refused because their target is a reserved topic (kept as dead letters).
	Failures *CounterVec
	// Rescued counts records whose claim expired unsettled and were put back
	// to be redelivered again with the same attempt, by queue.
	Rescued *CounterVec
	// ArchiveFailures counts archive copies whose produce failed, by queue
	// and reason.
	ArchiveFailures *CounterVec
	// Lateness is how long after its due time a record was produced.
	Lateness prometheus.Histogram
	// BatchSeconds is the time to claim, produce and mark one batch.
	BatchSeconds prometheus.Histogram
	// Archived counts records copied to an archive topic, by queue.
	Archived *CounterVec
	// Joined counts repeat failures joined to their record, by queue.
	Joined *CounterVec
	// Completed counts completion acknowledgements applied, by queue.
	Completed *CounterVec
	// Unacknowledged counts redelivered records marked unacknowledged (no
	// acknowledgement within the topic's ack_timeout), by queue.
	Unacknowledged *CounterVec
	// ParkedTopics is how many target topics the scheduler has parked: their
	// produce fails for a reason of the topic (it does not exist, Redrive may
	// not write to it), so their queues are probed, not claimed.
	ParkedTopics prometheus.Gauge
}

func newRedelivery(reg prometheus.Registerer, l *Labels) *Redelivery {
	r := &Redelivery{
		Redelivered: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_redelivered_total",
			Help: "Records produced back to their topic by the scheduler, by queue.",
		}, []string{"queue"}, l.Queue),
		Failures: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_redelivery_failures_total",
			Help: "Redeliveries whose produce failed, by queue and reason (unknown_topic, invalid_topic, too_large, authorization, timeout, broker); the record waits on its own backoff and is tried again. Reason not_routable: the target is one of Redrive's own topics or a Kafka internal topic, and the record is kept as a dead letter instead.",
		}, []string{"queue", "reason"}, l.Queue, enum()),
		Rescued: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_redelivery_rescued_total",
			Help: "Records whose redelivery claim expired unsettled (a scheduler died or lost Postgres) and were put back; each may be delivered twice with the same redrive.id and redrive.attempt.",
		}, []string{"queue"}, l.Queue),
		ArchiveFailures: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_archive_failures_total",
			Help: "Archive copies whose produce failed, by queue and reason; the record is kept and tried again after its own backoff.",
		}, []string{"queue", "reason"}, l.Queue, enum()),
		Lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_redelivery_lateness_seconds",
			Help:    "How long after its due time a record was produced.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		BatchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_redelivery_batch_duration_seconds",
			Help:    "Time to claim, produce and mark one redelivery batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		Archived: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_archived_total",
			Help: "Records copied to their archive topic (reference copies included), by queue.",
		}, []string{"queue"}, l.Queue),
		Joined: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_repeat_failures_total",
			Help: "Repeat failures of redelivered records joined to their record, by queue.",
		}, []string{"queue"}, l.Queue),
		Completed: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_completed_total",
			Help: "Redelivered records the consumer acknowledged as processed (client library option AckCompletions), by queue.",
		}, []string{"queue"}, l.Queue),
		Unacknowledged: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_unacknowledged_total",
			Help: "Redelivered records of completion: ack topics marked unacknowledged: no acknowledgement came within the topic's ack_timeout. They stay available and may be retried; by queue.",
		}, []string{"queue"}, l.Queue),
		ParkedTopics: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "redrive_redelivery_parked_topics",
			Help: "Target topics the scheduler has parked because their produce fails for a reason of the topic (unknown_topic, authorization): their queues' records wait, untouched, and one record is probed from 5 s to 1 min apart.",
		}),
	}
	reg.MustRegister(r.Redelivered, r.Failures, r.Rescued, r.ArchiveFailures, r.Lateness, r.BatchSeconds, r.Archived, r.Joined, r.Completed,
		r.Unacknowledged, r.ParkedTopics)
	return r
}
