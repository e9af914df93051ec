package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Other is the label value that stands for every value past a bound: the
// queues past the queue limit, undeclared record types, and so on.
const Other = "other"

// DefaultMaxQueues is how many queues get their own label by default
// (REDRIVE_METRICS_MAX_QUEUES).
const DefaultMaxQueues = 300

// Bounds of the labels that are not queues. Their values come from
// operators (replay rule names, DLQ topics, declared record types) or from
// Redrive's own code (reasons, formats, results, event types): a bound keeps
// a mistake or an abuse from growing /metrics without limit.
const (
	// MaxTypes bounds the record types with their own label (types named in
	// policy files).
	MaxTypes = 100
	// MaxRules bounds the replay rule names with their own label.
	MaxRules = 100
	// MaxTopics bounds the DLQ topics with their own label.
	MaxTopics = 100
	// maxEnum bounds a label whose values Redrive's code chooses.
	maxEnum = 64
)

// Labels keeps the label values of Redrive's metrics in bounded sets, so that
// no record, topic or producer can grow /metrics: whatever goes through
// ingest, a scrape holds a bounded number of series.
//
// Queues: a queue declared in a policy file (by exact name) or through the API
// always gets its own label, up to the limit; any other queue gets one when it
// is first seen while fewer than the limit have one; every other queue is
// reported as "other". At most twice the limit queue values exist (when
// queues are declared after the limit was reached by others).
//
// Record types (ojs_dead_letter_added_total's type, as OJS dead-letter spec
// §11.2 asks): a type some policy file overrides keeps its name (up to
// MaxTypes); any other is "other"; no type stays "".
//
// Labels is safe for concurrent use.
type Labels struct {
	maxQueues atomic.Int64
	declared  atomic.Pointer[Declared]

	mu        sync.RWMutex
	queues    map[string]bool // queues with their own label -> declared
	nDeclared int

	types, rules, topics *firstSeen
}

// Declared says which queues and record types operators declared. Nil
// functions declare nothing.
type Declared struct {
	// Queue reports whether a queue is declared in a policy file (by exact
	// name) or through the API.
	Queue func(string) bool
	// Type reports whether a policy file has a per-type override for a type.
	Type func(string) bool
}

// NewLabels returns label bounds keeping at most maxQueues queues (<= 0:
// DefaultMaxQueues) and declaring nothing.
func NewLabels(maxQueues int) *Labels {
	l := &Labels{queues: map[string]bool{}, types: newFirstSeen(MaxTypes), rules: newFirstSeen(MaxRules), topics: newFirstSeen(MaxTopics)}
	l.SetMaxQueues(maxQueues)
	l.declared.Store(&Declared{})
	return l
}

// SetMaxQueues changes the queue limit (<= 0: DefaultMaxQueues). Queues that
// already have a label keep it. Call it before recording anything.
func (l *Labels) SetMaxQueues(n int) {
	if n <= 0 {
		n = DefaultMaxQueues
	}
	l.maxQueues.Store(int64(n))
}

// SetDeclared sets what operators declared. The functions are called when a
// queue or type is seen without a label yet; they must be cheap and safe for
// concurrent use.
func (l *Labels) SetDeclared(d Declared) { l.declared.Store(&d) }

// Queue is the label value of queue q.
func (l *Labels) Queue(q string) string {
	l.mu.RLock()
	_, ok := l.queues[q]
	l.mu.RUnlock()
	if ok {
		return q
	}
	declared := false
	if f := l.declared.Load().Queue; f != nil {
		declared = f(q)
	}
	limit := int(l.maxQueues.Load())
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.queues[q]; ok {
		return q
	}
	switch {
	case declared && l.nDeclared < limit:
		l.nDeclared++
	case !declared && len(l.queues) < limit:
	default:
		return Other
	}
	l.queues[q] = declared
	return q
}

// Type is the label value of record type t.
func (l *Labels) Type(t string) string {
	if t == "" {
		return ""
	}
	if f := l.declared.Load().Type; f == nil || !f(t) {
		return Other
	}
	return l.types.value(t)
}

// Rule is the label value of replay rule name r.
func (l *Labels) Rule(r string) string { return l.rules.value(r) }

// Topic is the label value of DLQ topic t.
func (l *Labels) Topic(t string) string { return l.topics.value(t) }

// firstSeen keeps the first n values seen; later ones are "other".
type firstSeen struct {
	n    int
	mu   sync.RWMutex
	seen map[string]struct{}
}

func newFirstSeen(n int) *firstSeen { return &firstSeen{n: n, seen: map[string]struct{}{}} }

func (f *firstSeen) value(v string) string {
	f.mu.RLock()
	_, ok := f.seen[v]
	f.mu.RUnlock()
	if ok {
		return v
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.seen[v]; ok {
		return v
	}
	if len(f.seen) >= f.n {
		return Other
	}
	f.seen[v] = struct{}{}
	return v
}

// bound maps one label's values into a bounded set.
type bound func(string) string

// enum bounds a label whose values Redrive's own code chooses (reasons,
// results, formats): a safety net, never reached by today's values.
func enum() bound { return newFirstSeen(maxEnum).value }

// CounterVec is a prometheus.CounterVec whose label values go through
// bounds: every series it creates has label values from a bounded set.
type CounterVec = boundedVec[prometheus.Counter, *prometheus.CounterVec]

// GaugeVec is a prometheus.GaugeVec whose label values go through bounds.
type GaugeVec = boundedVec[prometheus.Gauge, *prometheus.GaugeVec]

func newCounterVec(opts prometheus.CounterOpts, labels []string, bounds ...bound) *CounterVec {
	return newBoundedVec[prometheus.Counter](prometheus.NewCounterVec(opts, labels), labels, bounds)
}

func newGaugeVec(opts prometheus.GaugeOpts, labels []string, bounds ...bound) *GaugeVec {
	return newBoundedVec[prometheus.Gauge](prometheus.NewGaugeVec(opts, labels), labels, bounds)
}

// vec is a prometheus vector of metrics M (prometheus.CounterVec, GaugeVec).
type vec[M any] interface {
	prometheus.Collector
	WithLabelValues(lvs ...string) M
}

// boundedVec is a vector V whose label values go through bounds, one per
// label (CounterVec, GaugeVec).
type boundedVec[M any, V vec[M]] struct {
	vec    V
	bounds []bound
}

func newBoundedVec[M any, V vec[M]](vec V, labels []string, bounds []bound) *boundedVec[M, V] {
	if len(bounds) != len(labels) {
		panic("metrics: one bound per label")
	}
	return &boundedVec[M, V]{vec: vec, bounds: bounds}
}

// WithLabelValues returns the metric of the bounded label values.
func (v *boundedVec[M, V]) WithLabelValues(lvs ...string) M {
	return v.vec.WithLabelValues(apply(v.bounds, lvs)...)
}

// Describe implements prometheus.Collector.
func (v *boundedVec[M, V]) Describe(ch chan<- *prometheus.Desc) { v.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (v *boundedVec[M, V]) Collect(ch chan<- prometheus.Metric) { v.vec.Collect(ch) }

// apply returns lvs mapped through bounds, without changing the caller's slice.
func apply(bounds []bound, lvs []string) []string {
	out := make([]string, len(lvs))
	for i, v := range lvs {
		if i < len(bounds) {
			v = bounds[i](v)
		}
		out[i] = v
	}
	return out
}
