package metrics

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// DeadLetter holds the OJS dead-letter metrics (DLQ spec §11.2, dots mapped to
// underscores) and Redrive's retention, replay and Kafka lag metrics.
//
// "In the DLQ" means state discarded with exhaustion dead_letter: the records
// OJS says must be retained (DLQ spec §4.2). Records still retrying, redelivered
// records awaiting an outcome, discards and completed records are not counted.
type DeadLetter struct {
	// AddedTotal counts records that entered the DLQ, by queue and type
	// (ojs_dead_letter_added_total). Ingest calls Added.
	AddedTotal *CounterVec
	// RetriedTotal counts manual retries of dead letters
	// (ojs_dead_letter_retried_total). The API calls Retried.
	RetriedTotal *CounterVec
	// PrunedTotal counts dead letters removed by retention (ojs_dead_letter_pruned_total).
	PrunedTotal *CounterVec
	// ReplayedTotal counts replays by replay rules (ojs_dead_letter_replayed_total).
	ReplayedTotal *CounterVec
	// RecordsPruned counts every record the pruner removed, dead letters,
	// discards and completed records alike, by queue, state and reason.
	RecordsPruned *CounterVec
	// PrunerRuns counts pruner passes by result: ok, error, not_leader.
	PrunerRuns *CounterVec
	// Partitions counts weekly partitions of the record tables the pruner
	// created ahead or dropped, by action: created, dropped.
	Partitions *CounterVec
	// PrunerLastSuccess is the Unix time of the last complete pruning pass.
	PrunerLastSuccess prometheus.Gauge
	// PrunerDuration is how long a pruning pass took.
	PrunerDuration prometheus.Histogram
	// ReplayRuns counts replay-rule passes by result: ok, error, not_leader.
	ReplayRuns *CounterVec
	// ConsumerLag is the processor's consumer-group lag on each DLQ topic (kadm).
	ConsumerLag *GaugeVec
	// StatsErrors counts failed refreshes of the gauges computed from Postgres.
	StatsErrors prometheus.Counter

	// Labels bounds the label values (queues, types, rules, topics).
	Labels *Labels

	depth *depthCollector
}

// QueueDepth is the DLQ size of one queue, read from Postgres.
type QueueDepth struct {
	Count  int64
	Oldest time.Time // discarded_at of the oldest dead letter
}

// NewDeadLetter creates the dead-letter collectors and registers them on reg
// (nil: not registered). now is the clock for ages (nil: time.Now). Its
// labels are bounded by a Labels of its own (DefaultMaxQueues, nothing
// declared); New shares one Labels among all metrics.
func NewDeadLetter(reg prometheus.Registerer, now func() time.Time) *DeadLetter {
	return newDeadLetter(reg, now, NewLabels(0))
}

func newDeadLetter(reg prometheus.Registerer, now func() time.Time, l *Labels) *DeadLetter {
	if now == nil {
		now = time.Now
	}
	d := &DeadLetter{
		Labels: l,
		AddedTotal: newCounterVec(prometheus.CounterOpts{
			Name: "ojs_dead_letter_added_total",
			Help: "Records that entered the dead-letter queue (discarded as dead_letter), by queue (source topic; \"other\" past REDRIVE_METRICS_MAX_QUEUES) and type (types named in policy files; \"other\" for the rest).",
		}, []string{"queue", "type"}, l.Queue, l.Type),
		RetriedTotal: newCounterVec(prometheus.CounterOpts{
			Name: "ojs_dead_letter_retried_total",
			Help: "Dead letters retried manually through the API, by queue.",
		}, []string{"queue"}, l.Queue),
		PrunedTotal: newCounterVec(prometheus.CounterOpts{
			Name: "ojs_dead_letter_pruned_total",
			Help: "Dead letters removed by the dead-letter retention (max_age, max_count), by queue.",
		}, []string{"queue"}, l.Queue),
		ReplayedTotal: newCounterVec(prometheus.CounterOpts{
			Name: "ojs_dead_letter_replayed_total",
			Help: "Dead letters replayed by a replay rule, by queue and rule.",
		}, []string{"queue", "rule"}, l.Queue, l.Rule),
		RecordsPruned: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_pruned_records_total",
			Help: "Records removed by the pruner, by queue, state (discarded, completed) and reason (max_age, max_count, retention.discarded, retention.completed).",
		}, []string{"queue", "state", "reason"}, l.Queue, enum(), enum()),
		PrunerRuns: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_pruner_runs_total",
			Help: "Pruning passes, by result: ok, error, or not_leader (another replica holds the pruning lock).",
		}, []string{"result"}, enum()),
		Partitions: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_partitions_total",
			Help: "Weekly partitions of the record tables, by action: created (ahead of time) or dropped (none of their records needed any more).",
		}, []string{"action"}, enum()),
		PrunerLastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "redrive_pruner_last_success_timestamp_seconds",
			Help: "Unix time of the last complete pruning pass on this replica (0: none yet).",
		}),
		PrunerDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_pruner_duration_seconds",
			Help:    "Duration of a pruning pass.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 9),
		}),
		ReplayRuns: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_replay_runs_total",
			Help: "Replay-rule passes, by result: ok, error, or not_leader.",
		}, []string{"result"}, enum()),
		ConsumerLag: newGaugeVec(prometheus.GaugeOpts{
			Name: "redrive_consumer_lag",
			Help: "Records in the DLQ topics not yet consumed (and committed) by the processor's consumer group, by DLQ topic.",
		}, []string{"topic"}, l.Topic),
		StatsErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_stats_refresh_errors_total",
			Help: "Failed refreshes of the gauges read from Postgres (ojs_dead_letter_total, oldest age); the gauges keep their last values.",
		}),
		depth: &depthCollector{now: now, known: map[string]QueueDepth{}, states: map[[3]string]float64{}, errorTypes: map[[2]string]float64{}},
	}
	for _, a := range []string{"created", "dropped"} {
		d.Partitions.WithLabelValues(a)
	}
	for _, r := range []string{"ok", "error", "not_leader"} {
		d.PrunerRuns.WithLabelValues(r)
		d.ReplayRuns.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(d.AddedTotal, d.RetriedTotal, d.PrunedTotal, d.ReplayedTotal, d.RecordsPruned,
			d.PrunerRuns, d.Partitions, d.PrunerLastSuccess, d.PrunerDuration, d.ReplayRuns, d.ConsumerLag, d.StatsErrors, d.depth)
	}
	return d
}

// Added counts n records of queue and type that entered the DLQ. Call it after
// the rows are committed, for records stored as discarded/dead_letter.
func (d *DeadLetter) Added(queue, typ string, n int) {
	if d != nil && n > 0 {
		d.AddedTotal.WithLabelValues(queue, typ).Add(float64(n))
	}
}

// Retried counts n manual retries of dead letters of queue.
func (d *DeadLetter) Retried(queue string, n int) {
	if d != nil && n > 0 {
		d.RetriedTotal.WithLabelValues(queue).Add(float64(n))
	}
}

// SetDepth replaces the per-queue DLQ sizes (from a Postgres count). Queues
// seen before and missing now report 0, so a purged queue drops to 0 instead of
// disappearing.
//
// Queues are reported under their label (Labels.Queue): queues without one
// are summed as "other" (with the oldest dead letter among them). Queues new
// to the labels are offered one largest first, so that the biggest queues get
// their own series.
func (d *DeadLetter) SetDepth(depth map[string]QueueDepth) {
	byLabel := map[string]QueueDepth{}
	for _, q := range largestFirst(depth, func(d QueueDepth) int64 { return d.Count }) {
		qd, l := depth[q], d.Labels.Queue(q)
		sum := byLabel[l]
		sum.Count += qd.Count
		if qd.Count > 0 && !qd.Oldest.IsZero() && (sum.Oldest.IsZero() || qd.Oldest.Before(sum.Oldest)) {
			sum.Oldest = qd.Oldest
		}
		byLabel[l] = sum
	}
	c := d.depth
	c.mu.Lock()
	defer c.mu.Unlock()
	for q := range c.known {
		c.known[q] = QueueDepth{}
	}
	maps.Copy(c.known, byLabel)
	c.ready = true
}

// largestFirst returns the keys of m, largest size first, then by name.
func largestFirst[V any](m map[string]V, size func(V) int64) []string {
	return slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if sa, sb := size(m[a]), size(m[b]); sa != sb {
			return cmp.Compare(sb, sa)
		}
		return strings.Compare(a, b)
	})
}

// RecordCount is the number of records of one queue, state, exhaustion and
// error type (from the statistics table).
type RecordCount struct {
	Queue, State, Exhaustion, ErrorType string
	N                                   int64
}

// MaxErrorTypesPerQueue bounds the error_type label of
// redrive_dead_letter_error_types per queue; smaller ones are summed as "other".
const MaxErrorTypesPerQueue = 20

// SetRecordCounts replaces the per-state record counts and the dead letters
// per error type. Series seen before and missing now report 0.
//
// Queues are reported under their label (Labels.Queue), offered largest
// first; the error types of "other" are those of all the queues it sums.
func (d *DeadLetter) SetRecordCounts(rows []RecordCount) {
	perQueue := map[string]int64{}
	for _, r := range rows {
		perQueue[r.Queue] += r.N
	}
	label := map[string]string{}
	for _, q := range largestFirst(perQueue, func(n int64) int64 { return n }) {
		label[q] = d.Labels.Queue(q)
	}
	states := map[[3]string]float64{}
	byType := map[string]map[string]float64{}
	for _, r := range rows {
		q := label[r.Queue]
		states[[3]string{q, r.State, r.Exhaustion}] += float64(r.N)
		if r.State == "discarded" && r.Exhaustion == "dead_letter" {
			if byType[q] == nil {
				byType[q] = map[string]float64{}
			}
			byType[q][r.ErrorType] += float64(r.N)
		}
	}
	errs := map[[2]string]float64{}
	for q, types := range byType {
		names := slices.SortedFunc(maps.Keys(types), func(a, b string) int {
			if types[a] != types[b] {
				return cmpFloat(types[b], types[a])
			}
			return strings.Compare(a, b)
		})
		for i, et := range names {
			if i >= MaxErrorTypesPerQueue {
				et = "other"
			}
			errs[[2]string{q, et}] += types[names[i]]
		}
	}
	c := d.depth
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.states {
		c.states[k] = 0
	}
	maps.Copy(c.states, states)
	for k := range c.errorTypes {
		c.errorTypes[k] = 0
	}
	maps.Copy(c.errorTypes, errs)
	c.countsReady = true
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// depthCollector exports ojs_dead_letter_total and the oldest age from the
// last snapshot; nothing until the first one, so a restart never shows a fake 0.
type depthCollector struct {
	now   func() time.Time
	mu    sync.Mutex
	known map[string]QueueDepth
	ready bool

	states      map[[3]string]float64 // queue, state, exhaustion
	errorTypes  map[[2]string]float64 // queue, error_type
	countsReady bool

	incidents      map[string]float64 // queue
	incidentsReady bool

	due      map[string]float64 // queue
	dueReady bool
}

var (
	totalDesc = prometheus.NewDesc("ojs_dead_letter_total",
		"Current dead-letter queue size per queue (records discarded as dead_letter), read from Postgres.", []string{"queue"}, nil)
	oldestDesc = prometheus.NewDesc("redrive_dead_letter_oldest_age_seconds",
		"Age of the oldest dead letter per queue (now - discarded_at); 0 when the queue is empty.", []string{"queue"}, nil)
	recordsDesc = prometheus.NewDesc("redrive_records",
		"Records stored per queue, state and exhaustion (empty unless discarded), read from Postgres.", []string{"queue", "state", "exhaustion"}, nil)
	incidentsDesc = prometheus.NewDesc("redrive_incidents",
		"Incidents (failures grouped by error fingerprint) with live records, per queue.", []string{"queue"}, nil)
	dueDesc = prometheus.NewDesc("redrive_redelivery_due",
		"Records whose redelivery is due and not yet claimed, per queue, read from Postgres (saturates at 100,000 per queue): the backlog an autoscaler adds replicas for.", []string{"queue"}, nil)
	errorTypesDesc = prometheus.NewDesc("redrive_dead_letter_error_types",
		"Dead letters per queue and error type of their last failure (the 20 largest per queue; the rest as \"other\").", []string{"queue", "error_type"}, nil)
)

func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- totalDesc
	ch <- oldestDesc
	ch <- recordsDesc
	ch <- errorTypesDesc
	ch <- incidentsDesc
	ch <- dueDesc
}

func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.countsReady {
		for k, v := range c.states {
			ch <- prometheus.MustNewConstMetric(recordsDesc, prometheus.GaugeValue, v, k[0], k[1], k[2])
		}
		for k, v := range c.errorTypes {
			ch <- prometheus.MustNewConstMetric(errorTypesDesc, prometheus.GaugeValue, v, k[0], k[1])
		}
	}
	if c.incidentsReady {
		for q, v := range c.incidents {
			ch <- prometheus.MustNewConstMetric(incidentsDesc, prometheus.GaugeValue, v, q)
		}
	}
	if c.dueReady {
		for q, v := range c.due {
			ch <- prometheus.MustNewConstMetric(dueDesc, prometheus.GaugeValue, v, q)
		}
	}
	if !c.ready {
		return
	}
	now := c.now()
	for _, q := range slices.Sorted(maps.Keys(c.known)) {
		d := c.known[q]
		ch <- prometheus.MustNewConstMetric(totalDesc, prometheus.GaugeValue, float64(d.Count), q) //nolint:promlinter // the OJS dead-letter spec §11.2 name (ojs.dead_letter.total)
		age := 0.0
		if d.Count > 0 && !d.Oldest.IsZero() {
			age = max(0, now.Sub(d.Oldest).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, q)
	}
}

// KafkaClientOpts returns the option that exports a franz-go client's metrics
// (kprom: connections, bytes, produce/fetch records, request latencies) on reg
// under redrive_kafka_*, labelled client=name and node_id (the broker), never
// topic. Give every client its own name.
func KafkaClientOpts(reg prometheus.Registerer, name string) kgo.Opt {
	m := kprom.NewMetrics("redrive_kafka",
		kprom.Registerer(reg),
		kprom.WithStaticLabel(prometheus.Labels{"client": name}),
		// By node, never by topic: the scheduler produces to every source
		// topic, and producers choose those.
		kprom.FetchAndProduceDetail(kprom.ByNode, kprom.Records, kprom.UncompressedBytes),
	)
	return kgo.WithHooks(m)
}

// SetIncidents replaces the incidents with live records per queue. Queues
// seen before and missing now report 0.
func (d *DeadLetter) SetIncidents(perQueue map[string]int64) {
	c := d.depth
	byLabel := d.byQueueLabel(perQueue)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.incidents = replaced(c.incidents, byLabel)
	c.incidentsReady = true
}

// SetRedeliveryDue replaces the records due for redelivery per queue. Queues
// seen before and missing now report 0, so a drained backlog reads 0, not its
// last value.
func (d *DeadLetter) SetRedeliveryDue(perQueue map[string]int64) {
	c := d.depth
	byLabel := d.byQueueLabel(perQueue)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.due = replaced(c.due, byLabel)
	c.dueReady = true
}

// byQueueLabel sums perQueue under each queue's label, offering the largest
// queues their own label first.
func (d *DeadLetter) byQueueLabel(perQueue map[string]int64) map[string]float64 {
	byLabel := map[string]float64{}
	for _, q := range largestFirst(perQueue, func(n int64) int64 { return n }) {
		byLabel[d.Labels.Queue(q)] += float64(perQueue[q])
	}
	return byLabel
}

// replaced is old with every series set to 0, then overwritten by now: a
// series seen before and missing now reads 0, not its last value.
func replaced(old, now map[string]float64) map[string]float64 {
	if old == nil {
		old = map[string]float64{}
	}
	for k := range old {
		old[k] = 0
	}
	maps.Copy(old, now)
	return old
}

// SetClock replaces the clock used for ages (tests inject one).
func (d *DeadLetter) SetClock(now func() time.Time) {
	d.depth.mu.Lock()
	defer d.depth.mu.Unlock()
	d.depth.now = now
}
