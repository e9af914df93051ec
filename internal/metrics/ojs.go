package metrics

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// OJS holds the metrics of the OJS observability extension
// (ojs-observability.md §8) for the jobs of the worker API: jobs published,
// fetched, acked, nacked and cancelled over HTTP, and the records of
// pull-mode queues workers fetch. OTel names map to Prometheus names as
// client_golang's OTel bridge writes them: dots become underscores,
// counters end in _total and seconds histograms in _seconds
// (ojs.job.enqueued is ojs_job_enqueued_total, ojs.job.duration is
// ojs_job_duration_seconds).
//
// Labels are bounded (§8.4: "Metric labels MUST have bounded cardinality"):
// queue through Labels.Queue, as every other queue label; type keeps its
// name when a policy file declares it (Labels.Type), else for the first
// MaxJobTypes types this replica sees, and every other type is "other";
// state is one of the OJS job states. A nil *OJS records nothing.
type OJS struct {
	// Enqueued counts jobs published (ojs.job.enqueued), by queue and type.
	Enqueued *CounterVec
	// Completed counts jobs that reached completed (ojs.job.completed).
	Completed *CounterVec
	// Failed counts jobs that reached discarded by a failed attempt
	// (ojs.job.failed).
	Failed *CounterVec
	// Retried counts failed attempts after which the job is tried again
	// (ojs.job.retried).
	Retried *CounterVec
	// Cancelled counts jobs cancelled (ojs.job.cancelled).
	Cancelled *CounterVec
	// Duration is how long each attempt ran, from its fetch to its ack,
	// failure or cancel, by queue, type and the state it left the job in
	// (ojs.job.duration).
	Duration *HistogramVec
	// QueueTime is the time from a job's enqueue to its first fetch
	// (ojs.job.queue_time).
	QueueTime *HistogramVec

	// Labels bounds the queue and declared-type labels (shared with the
	// other metrics).
	Labels *Labels

	types *firstSeen
	depth *ojsDepth
}

// MaxJobTypes bounds the job types a replica gives their own type label
// besides the types policy files declare (ojs-observability §8.4: "type:
// Bounded by the number of registered job types (typically < 200)").
const MaxJobTypes = 200

// Recommended bucket boundaries (ojs-observability §8.2).
var (
	// JobDurationBuckets are ojs.job.duration's, in seconds.
	JobDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	// JobQueueTimeBuckets are ojs.job.queue_time's, in seconds.
	JobQueueTimeBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600}
)

// HistogramVec is a prometheus.HistogramVec whose label values go through
// bounds.
type HistogramVec = boundedVec[prometheus.Observer, *prometheus.HistogramVec]

func newHistogramVec(opts prometheus.HistogramOpts, labels []string, bounds ...bound) *HistogramVec {
	return newBoundedVec[prometheus.Observer](prometheus.NewHistogramVec(opts, labels), labels, bounds)
}

// NewOJS creates the OJS job metrics, bounded by l (nil: a Labels of their
// own), and registers them on reg (nil: not registered). ojs_queue_depth
// shows nothing until SetDepthSource.
func NewOJS(reg prometheus.Registerer, l *Labels) *OJS {
	if l == nil {
		l = NewLabels(0)
	}
	o := &OJS{Labels: l, types: newFirstSeen(MaxJobTypes)}
	qt := []string{"queue", "type"}
	counter := func(name, help string) *CounterVec {
		return newCounterVec(prometheus.CounterOpts{Name: name, Help: help}, qt, l.Queue, o.jobType)
	}
	o.Enqueued = counter("ojs_job_enqueued_total", "Jobs enqueued through the worker API (ojs.job.enqueued), by queue and type.")
	o.Completed = counter("ojs_job_completed_total", "Jobs that reached completed: a worker acked them (ojs.job.completed).")
	o.Failed = counter("ojs_job_failed_total", "Jobs that reached discarded: an attempt failed and the retry policy gave up (ojs.job.failed).")
	o.Retried = counter("ojs_job_retried_total", "Failed attempts (nack, expired lease, execution timeout) after which the job is tried again (ojs.job.retried).")
	o.Cancelled = counter("ojs_job_cancelled_total", "Jobs cancelled through the API (ojs.job.cancelled).")
	o.Duration = newHistogramVec(prometheus.HistogramOpts{
		Name:    "ojs_job_duration_seconds",
		Help:    "How long an attempt ran, from its fetch to its ack, failure or cancel, by the state it left the job in: completed, retryable, available (lease expired), discarded, cancelled (ojs.job.duration).",
		Buckets: JobDurationBuckets,
	}, []string{"queue", "type", "state"}, l.Queue, o.jobType, enum())
	o.QueueTime = newHistogramVec(prometheus.HistogramOpts{
		Name:    "ojs_job_queue_time_seconds",
		Help:    "Time from a job's enqueue to its first fetch by a worker (ojs.job.queue_time); a scheduled job's includes its delay.",
		Buckets: JobQueueTimeBuckets,
	}, qt, l.Queue, o.jobType)
	o.depth = &ojsDepth{labels: l, states: enum(), known: map[[2]string]float64{}}
	if reg != nil {
		reg.MustRegister(o.Enqueued, o.Completed, o.Failed, o.Retried, o.Cancelled, o.Duration, o.QueueTime, o.depth)
	}
	return o
}

// jobType is the label value of job type t: its name when a policy file
// declares it or while fewer than MaxJobTypes others have one, else "other".
func (o *OJS) jobType(t string) string {
	if v := o.Labels.Type(t); v != Other {
		return v
	}
	return o.types.value(t)
}

// JobEnqueued counts a job of queue and type enqueued.
func (o *OJS) JobEnqueued(queue, typ string) {
	if o != nil {
		o.Enqueued.WithLabelValues(queue, typ).Inc()
	}
}

// JobStarted records the queue time of a job's first attempt: wait, from
// its enqueue to its fetch.
func (o *OJS) JobStarted(queue, typ string, wait time.Duration) {
	if o != nil {
		o.QueueTime.WithLabelValues(queue, typ).Observe(seconds(wait))
	}
}

// AttemptEnded records how long an attempt ran (d), ended leaving the job
// in state.
func (o *OJS) AttemptEnded(queue, typ, state string, d time.Duration) {
	if o != nil {
		o.Duration.WithLabelValues(queue, typ, state).Observe(seconds(d))
	}
}

// JobCompleted counts a job completed.
func (o *OJS) JobCompleted(queue, typ string) {
	if o != nil {
		o.Completed.WithLabelValues(queue, typ).Inc()
	}
}

// JobFailed counts a job a failed attempt discarded.
func (o *OJS) JobFailed(queue, typ string) {
	if o != nil {
		o.Failed.WithLabelValues(queue, typ).Inc()
	}
}

// JobRetried counts a failed attempt after which the job is tried again.
func (o *OJS) JobRetried(queue, typ string) {
	if o != nil {
		o.Retried.WithLabelValues(queue, typ).Inc()
	}
}

// JobCancelled counts a job cancelled.
func (o *OJS) JobCancelled(queue, typ string) {
	if o != nil {
		o.Cancelled.WithLabelValues(queue, typ).Inc()
	}
}

// seconds is d in seconds, never below 0 (two clocks' skew).
func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// JobDepth reads the jobs per queue and OJS state (queue -> state -> n),
// cheaply: from the statistics table and small indexes, never by counting
// records.
type JobDepth func(ctx context.Context) (map[string]map[string]int64, error)

// DepthTimeout bounds one read of ojs_queue_depth at scrape time.
const DepthTimeout = 5 * time.Second

// SetDepthSource makes ojs_queue_depth (ojs.queue.depth, §8.3) read by read
// at each scrape; scrapes that come while a read runs share it. A read that
// fails keeps the last values and is reported to failed (nil: ignored).
func (o *OJS) SetDepthSource(read JobDepth, failed func(error)) {
	c := o.depth
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read, c.failed = read, failed
}

var ojsDepthDesc = prometheus.NewDesc("ojs_queue_depth",
	"Jobs per queue and OJS state (scheduled, available, active, retryable, completed, discarded, cancelled), read from Postgres at scrape time (ojs.queue.depth).",
	[]string{"queue", "state"}, nil)

// ojsDepth exports ojs_queue_depth, read at scrape time; nothing until the
// first read succeeds, so a database that is down never shows a fake 0.
type ojsDepth struct {
	labels *Labels
	states bound

	mu       sync.Mutex
	read     JobDepth
	failed   func(error)
	inflight chan struct{} // closed when the running read is done
	known    map[[2]string]float64
	ready    bool
}

func (c *ojsDepth) Describe(ch chan<- *prometheus.Desc) { ch <- ojsDepthDesc }

func (c *ojsDepth) Collect(ch chan<- prometheus.Metric) {
	for k, v := range c.refresh() {
		ch <- prometheus.MustNewConstMetric(ojsDepthDesc, prometheus.GaugeValue, v, k[0], k[1])
	}
}

// refresh reads the depth (or waits for the read another scrape runs) and
// returns the values to export.
func (c *ojsDepth) refresh() map[[2]string]float64 {
	c.mu.Lock()
	if c.read == nil {
		c.mu.Unlock()
		return nil
	}
	if wait := c.inflight; wait != nil {
		c.mu.Unlock()
		<-wait
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.snapshot()
	}
	done, read, failed := make(chan struct{}), c.read, c.failed
	c.inflight = done
	c.mu.Unlock()
	defer func() { // whatever happens to the read, the scrapes waiting go on
		c.mu.Lock()
		c.inflight = nil
		c.mu.Unlock()
		close(done)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), DepthTimeout)
	got, err := read(ctx)
	cancel()
	var byLabel map[[2]string]float64
	if err == nil {
		byLabel = c.byLabel(got)
	} else if failed != nil {
		failed(err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		for k := range c.known {
			c.known[k] = 0 // a queue gone since reads 0, not its last value
		}
		maps.Copy(c.known, byLabel)
		c.ready = true
	}
	return c.snapshot()
}

// byLabel sums got under each queue's label, the largest queues offered
// their own label first, and each state's.
func (c *ojsDepth) byLabel(got map[string]map[string]int64) map[[2]string]float64 {
	totals := make(map[string]int64, len(got))
	for q, states := range got {
		for _, n := range states {
			totals[q] += n
		}
	}
	out := map[[2]string]float64{}
	for _, q := range largestFirst(totals, func(n int64) int64 { return n }) {
		l := c.labels.Queue(q)
		for s, n := range got[q] {
			out[[2]string{l, c.states(s)}] += float64(n)
		}
	}
	return out
}

// snapshot copies the values to export; c.mu is held.
func (c *ojsDepth) snapshot() map[[2]string]float64 {
	if !c.ready {
		return nil
	}
	return maps.Clone(c.known)
}
