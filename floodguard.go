package redrive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rdclock "github.com/redrive/redrive/internal/clock"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/fingerprint"
)

// FloodHeader is the header a flood guard adds to a record it lets be
// dead-lettered while it was deciding whether a flood is on: the window's
// failures were already frequent and alike enough to trip it, only not yet
// FloodGuardConfig.MinFailures of them. Its value is the failure's
// fingerprint (of error type and message; see FloodGuard).
const FloodHeader = envelope.HeaderFlood

// ErrFlooded is matched (errors.Is) by the *FloodError a wrapped handler
// returns for a record its flood guard holds in Kafka.
var ErrFlooded = errors.New("redrive: flood guard holds the record")

// FloodError is returned by a wrapped handler for a record that a tripped
// flood guard holds: the record was neither processed nor dead-lettered and
// must not be committed. Keep polling: the guard has rewound the record's
// partition to it and paused it, and the record comes back from PollFetches
// once the guard resumes.
type FloodError struct {
	// Topic, Partition and Offset locate the held record.
	Topic     string
	Partition int32
	Offset    int64
	// Fingerprint is the flood's: the failure most records fail with.
	Fingerprint string
	// HandlerErr is the handler's error when it was called on the record
	// (the record that tripped the guard, a failed probe); nil for records
	// held without calling the handler.
	HandlerErr error
}

func (e *FloodError) Error() string {
	msg := fmt.Sprintf("redrive: flood guard holds %s[%d]@%d (flood %s): not processed, not dead-lettered",
		e.Topic, e.Partition, e.Offset, e.Fingerprint)
	if e.HandlerErr != nil {
		msg += fmt.Sprintf(" (handler error: %v)", e.HandlerErr)
	}
	return msg
}

// Is reports whether target is ErrFlooded.
func (e *FloodError) Is(target error) bool { return target == ErrFlooded }

// Unwrap returns the handler's error, if the handler was called.
func (e *FloodError) Unwrap() error { return e.HandlerErr }

// FloodState is the state of a flood guard.
type FloodState int

const (
	// FloodWatching is the normal state: records are handled, failures
	// dead-lettered, and the guard counts them.
	FloodWatching FloodState = iota
	// FloodTripped: a flood is on. Every record is held in Kafka; a probe
	// follows after a backoff.
	FloodTripped
	// FloodProbing: the paused partitions are fetched again and the next
	// record handed to the wrapped handler is a probe; the others are held.
	FloodProbing
)

func (s FloodState) String() string {
	switch s {
	case FloodWatching:
		return "watching"
	case FloodTripped:
		return "tripped"
	case FloodProbing:
		return "probing"
	}
	return fmt.Sprintf("FloodState(%d)", int(s))
}

// FloodEvent describes a change of a flood guard's state, for
// FloodGuardConfig.OnChange.
type FloodEvent struct {
	// State is the new state: FloodTripped when the guard trips or a probe
	// fails, FloodProbing when it probes, FloodWatching when a probe
	// succeeded and it resumed.
	State FloodState
	// Fingerprint identifies the flood's failure (of ErrorType and Message).
	Fingerprint string
	// ErrorType and Message are those of the failure that tripped the guard.
	ErrorType, Message string
	// Failures and Records are the window's counts when the guard tripped:
	// retryable failures, and all records handled.
	Failures, Records int
	// FailedProbes is how many probes have failed in this flood.
	FailedProbes int
	// Backoff is, when tripped, how long until the next probe.
	Backoff time.Duration
	// Duration is, when resumed, how long the flood lasted.
	Duration time.Duration
	// Topic, Partition and Offset locate the record that tripped the guard,
	// the failed probe, or the probe that succeeded (nothing for
	// FloodProbing).
	Topic     string
	Partition int32
	Offset    int64
}

// FloodGuardConfig configures FloodGuard. The zero value is usable: a zero
// field takes its default.
type FloodGuardConfig struct {
	// Window is how far back the guard looks at the handler's outcomes; the
	// window slides in tenths of it. Default 30s.
	Window time.Duration
	// MinFailures is how many retryable failures the window must hold for
	// the guard to trip. Default 20.
	MinFailures int
	// FailureRate is the share of the window's records (0 to 1) that must
	// have failed retryably for the guard to trip. Default 0.5.
	FailureRate float64
	// SameFingerprint is the share of the window's retryable failures (0 to
	// 1) that must share one fingerprint for the guard to trip. Default 0.8.
	SameFingerprint float64
	// ProbeBackoff is how long the guard holds records after tripping
	// before it probes with one; it doubles after each failed probe.
	// Default 1s.
	ProbeBackoff time.Duration
	// MaxProbeBackoff caps the doubling backoff between probes. Default 1m.
	MaxProbeBackoff time.Duration
	// Consumer is the client that consumes the records given to the wrapped
	// handler: the guard pauses, rewinds and resumes its partitions. Default:
	// the client given to New. It must not autocommit (use
	// kgo.DisableAutoCommit, or kgo.AutoCommitMarks and mark only what the
	// wrapped handler reports done).
	Consumer *kgo.Client
	// OnChange, if set, is called on every change of state, in order, from
	// the goroutine that made it (a wrapped handler's, or the guard's timer
	// for FloodProbing). It must not call the wrapped handler.
	OnChange func(FloodEvent)
	// Registerer, if set, registers the guard's metrics:
	// redrive_client_flood_guard_state (0 watching, 1 tripped, 2 probing)
	// and redrive_client_flood_guard_trips_total, labelled with the DLQ
	// topic and the consumer group.
	Registerer prometheus.Registerer
}

// Defaults of FloodGuardConfig.
const (
	DefaultFloodWindow          = 30 * time.Second
	DefaultFloodMinFailures     = 20
	DefaultFloodFailureRate     = 0.5
	DefaultFloodSameFingerprint = 0.8
	DefaultFloodProbeBackoff    = time.Second
	DefaultFloodMaxProbeBackoff = time.Minute
)

func (c FloodGuardConfig) withDefaults() FloodGuardConfig {
	if c.Window == 0 {
		c.Window = DefaultFloodWindow
	}
	if c.MinFailures == 0 {
		c.MinFailures = DefaultFloodMinFailures
	}
	if c.FailureRate == 0 {
		c.FailureRate = DefaultFloodFailureRate
	}
	if c.SameFingerprint == 0 {
		c.SameFingerprint = DefaultFloodSameFingerprint
	}
	if c.ProbeBackoff == 0 {
		c.ProbeBackoff = DefaultFloodProbeBackoff
	}
	if c.MaxProbeBackoff == 0 {
		c.MaxProbeBackoff = max(DefaultFloodMaxProbeBackoff, c.ProbeBackoff)
	}
	return c
}

func (c FloodGuardConfig) validate() error {
	switch {
	case c.Window < 0:
		return fmt.Errorf("window %v: must be positive", c.Window)
	case c.MinFailures < 0:
		return fmt.Errorf("min failures %d: must be positive", c.MinFailures)
	case !(c.FailureRate > 0 && c.FailureRate <= 1):
		return fmt.Errorf("failure rate %v: must be in (0, 1]", c.FailureRate)
	case !(c.SameFingerprint > 0 && c.SameFingerprint <= 1):
		return fmt.Errorf("same fingerprint %v: must be in (0, 1]", c.SameFingerprint)
	case c.ProbeBackoff < 0:
		return fmt.Errorf("probe backoff %v: must be positive", c.ProbeBackoff)
	case c.MaxProbeBackoff < c.ProbeBackoff:
		return fmt.Errorf("max probe backoff %v: must be at least the probe backoff %v", c.MaxProbeBackoff, c.ProbeBackoff)
	}
	cl := c.Consumer
	group, _ := cl.OptValue(kgo.ConsumerGroup).(string)
	topics, _ := cl.OptValue(kgo.ConsumeTopics).([]string)
	partitions, _ := cl.OptValue(kgo.ConsumePartitions).(map[string]map[int32]kgo.Offset)
	if group == "" && len(topics) == 0 && len(partitions) == 0 {
		return errors.New("the consumer consumes nothing: set FloodGuardConfig.Consumer to the client that polls the records")
	}
	manual, _ := cl.OptValue(kgo.DisableAutoCommit).(bool)
	marks, _ := cl.OptValue(kgo.AutoCommitMarks).(bool)
	if group != "" && !manual && !marks {
		return errors.New("the consumer autocommits every polled record, held ones too: use kgo.DisableAutoCommit (or kgo.AutoCommitMarks)")
	}
	return nil
}

// FloodGuard makes Wrap and Process stop dead-lettering when most records
// fail the same way at once — a database or an API the handler needs is
// down — and hold the records in Kafka, uncommitted, until it is back,
// instead of filling the DLQ with records that only needed to wait.
//
// The guard watches the wrapped handler's outcomes in a sliding window. It
// trips when the window holds at least MinFailures retryable failures (code
// RETRY: DISCARD, DEAD_LETTER and FAIL say the record is bad, not a
// dependency), they are at least FailureRate of its records, and the failure
// at hand shares its fingerprint (error type and normalized message: ids,
// numbers, hosts, times do not count) with at least SameFingerprint of them.
// Transient or scattered failures never trip it and are dead-lettered as
// without it; so are the failures before it trips, with the FloodHeader when
// they were already alike and frequent enough (at least two).
//
// Once tripped, the wrapped handler calls nothing and dead-letters nothing:
// it returns a *FloodError (errors.Is(err, ErrFlooded)) for the record that
// tripped it and for every record it is given, and pauses and rewinds each
// of their partitions on the Consumer (kgo PauseFetchPartitions, SetOffsets)
// to the first record it held there. The caller must not commit a held
// record and must keep polling and handing every polled record to the
// wrapped handler (Process does): held records come back from PollFetches
// after the guard resumes, in order, and are handled then, once.
//
// After ProbeBackoff the guard resumes fetching the paused partitions and
// the next record given to the wrapped handler is a probe: the handler runs
// on it alone. If it succeeds, the record is done, the guard resumes every
// paused partition and watches anew. If it fails with the flood's
// fingerprint, the guard holds it and probes again after twice the backoff,
// up to MaxProbeBackoff. If it fails otherwise, it is dead-lettered (it is
// not the flood's failure) and the next record probes.
//
// The guard is per DeadLetterer: records from every partition count
// together, and a tripped guard holds all of them. Each change of state is
// logged (tripped and failed probes at Warn, probing and resumed at Info),
// passed to OnChange and, with a Registerer, exported as metrics.
func FloodGuard(c FloodGuardConfig) Opt {
	return opt(func(cf *cfg) { cf.flood = &c })
}

// windowBuckets is how many buckets the sliding window has.
const windowBuckets = 10

// window counts outcomes in the last windowBuckets buckets of time.
type window struct {
	width int64 // of a bucket, in nanoseconds
	b     [windowBuckets]bucket
}

type bucket struct {
	at     int64 // which bucket of time the slot holds
	passed int   // successes and non-retryable failures
	failed int   // retryable failures
	fps    map[string]int
}

func newWindow(d time.Duration) window {
	w := window{width: max(1, int64(d)/windowBuckets)}
	w.reset()
	return w
}

func (w *window) reset() {
	for i := range w.b {
		w.b[i] = bucket{at: math.MinInt64}
	}
}

func (w *window) slot(now time.Time) *bucket {
	at := now.UnixNano() / w.width
	s := &w.b[(at%windowBuckets+windowBuckets)%windowBuckets]
	if s.at != at {
		s.at, s.passed, s.failed = at, 0, 0
		clear(s.fps)
	}
	return s
}

func (w *window) pass(now time.Time) { w.slot(now).passed++ }

func (w *window) fail(now time.Time, fp string) {
	s := w.slot(now)
	s.failed++
	if s.fps == nil {
		s.fps = map[string]int{}
	}
	s.fps[fp]++
}

// counts returns the window's retryable failures, records, and failures
// with fingerprint fp.
func (w *window) counts(now time.Time, fp string) (failures, records, same int) {
	at := now.UnixNano() / w.width
	for i := range w.b {
		s := &w.b[i]
		if s.at <= at-windowBuckets || s.at > at {
			continue
		}
		failures += s.failed
		records += s.passed + s.failed
		same += s.fps[fp]
	}
	return failures, records, same
}

// clock is time for the guard; tests inject a fake one.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func())
}

type realClock struct{}

func (realClock) Now() time.Time                      { return rdclock.Wall.Now() } // a test's moved time
func (realClock) AfterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

type topicPartition struct {
	topic     string
	partition int32
}

// heldPartition is the first record held on a partition: the guard rewound
// the partition to it, and no later record of the partition may be handled
// before it comes back.
type heldPartition struct {
	offset int64
	paused bool // paused by the guard and not resumed since
}

// floodGuard is a DeadLetterer's flood guard; see FloodGuard.
type floodGuard struct {
	cfg   FloodGuardConfig
	cl    *kgo.Client
	log   *slog.Logger
	clock clock

	stateGauge prometheus.Gauge   // nil without a Registerer
	tripsTotal prometheus.Counter // nil without a Registerer

	mu           sync.Mutex
	state        FloodState
	win          window
	probing      bool // a probe is being handled
	held         map[topicPartition]*heldPartition
	flood        FloodEvent // the current flood: what tripped the guard
	since        time.Time  // when it tripped
	backoff      time.Duration
	failedProbes int // in this flood
}

func newFloodGuard(c FloodGuardConfig, d *DeadLetterer) (*floodGuard, error) {
	if c.Consumer == nil {
		c.Consumer = d.cl
	}
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	g := &floodGuard{
		cfg:   c,
		cl:    c.Consumer,
		log:   d.log,
		clock: realClock{},
		win:   newWindow(c.Window),
		held:  map[topicPartition]*heldPartition{},
	}
	if c.Registerer != nil {
		labels := prometheus.Labels{"dlq_topic": d.cfg.dlqTopic, "group": d.cfg.group}
		g.stateGauge = prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "redrive_client_flood_guard_state",
			Help:        "State of the client library's flood guard: 0 watching, 1 tripped (records held in Kafka), 2 probing.",
			ConstLabels: labels,
		})
		g.tripsTotal = prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "redrive_client_flood_guard_trips_total",
			Help:        "Times the client library's flood guard tripped and began holding records in Kafka.",
			ConstLabels: labels,
		})
		for i, m := range []prometheus.Collector{g.stateGauge, g.tripsTotal} {
			if err := c.Registerer.Register(m); err != nil {
				if i > 0 {
					c.Registerer.Unregister(g.stateGauge)
				}
				return nil, fmt.Errorf("register metrics: %w", err)
			}
		}
	}
	return g, nil
}

// verdict is what becomes of a failed record.
type verdict int

const (
	deadLetter verdict = iota // publish, as without a guard
	deciding                  // publish with FloodHeader
	hold                      // keep in Kafka
)

// handle is Wrap's handler with the guard on.
func (g *floodGuard) handle(ctx context.Context, d *DeadLetterer, h Handler, r *kgo.Record) error {
	probe, held := g.admit(r)
	if held != nil {
		return held
	}
	err := d.run(ctx, h, r)
	if err == nil {
		g.succeeded(r, probe)
		if d.cfg.ack {
			d.ackCompletion(ctx, r)
		}
		return nil
	}
	f := classify(err)
	v, fp, held := g.failed(ctx, r, err, f, probe)
	switch v {
	case hold:
		return held
	case deciding:
		return d.publish(ctx, r, err, f, fp)
	}
	return d.publish(ctx, r, err, f, "")
}

// admit reports whether r may be handled, and whether as the probe; if not,
// it holds r and returns the *FloodError.
func (g *floodGuard) admit(r *kgo.Record) (probe bool, held error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	tp := topicPartition{r.Topic, r.Partition}
	hp := g.held[tp]
	if hp != nil && r.Offset > hp.offset {
		// Polled before the guard rewound the partition: it comes again
		// after the held record, unless the partition went to another
		// consumer that committed past it meanwhile.
		if hp.paused || !g.committedPast(tp, hp.offset) {
			return false, g.holdLocked(r, nil)
		}
		delete(g.held, tp)
		hp = nil
	}
	switch {
	case g.state == FloodWatching:
	case g.state == FloodProbing && !g.probing:
		g.probing, probe = true, true
	default:
		return false, g.holdLocked(r, nil)
	}
	if hp != nil && r.Offset == hp.offset {
		delete(g.held, tp) // back; held again if it must be
	}
	return probe, nil
}

// committedPast reports whether the consumer's group committed tp beyond
// offset (another member took the partition and handled the record).
func (g *floodGuard) committedPast(tp topicPartition, offset int64) bool {
	o, ok := g.cl.CommittedOffsets()[tp.topic][tp.partition]
	return ok && o.Offset > offset
}

// holdLocked keeps r in Kafka: it pauses r's partition and rewinds it to r,
// unless it is rewound to an earlier record already, and returns the
// *FloodError. g.mu is held, so that no probe resumes the partition between
// the decision and the pause.
func (g *floodGuard) holdLocked(r *kgo.Record, cause error) error {
	tp := topicPartition{r.Topic, r.Partition}
	if hp := g.held[tp]; hp == nil || r.Offset <= hp.offset {
		g.held[tp] = &heldPartition{offset: r.Offset, paused: true}
		g.cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
		g.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{r.Topic: {r.Partition: {Epoch: r.LeaderEpoch, Offset: r.Offset}}})
	}
	return &FloodError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Fingerprint: g.flood.Fingerprint, HandlerErr: cause}
}

// succeeded counts a success; a successful probe resumes.
func (g *floodGuard) succeeded(r *kgo.Record, probe bool) {
	g.mu.Lock()
	if !probe {
		if g.state == FloodWatching {
			g.win.pass(g.clock.Now())
		}
		g.mu.Unlock()
		return
	}
	ev := g.flood
	ev.State, ev.FailedProbes, ev.Duration = FloodWatching, g.failedProbes, g.clock.Now().Sub(g.since)
	ev.Topic, ev.Partition, ev.Offset = r.Topic, r.Partition, r.Offset
	g.setState(FloodWatching)
	g.probing, g.failedProbes, g.flood = false, 0, FloodEvent{}
	g.win.reset()
	g.unpause()
	g.mu.Unlock()

	g.log.Info("flood guard resumed: probe succeeded, consuming again",
		"fingerprint", ev.Fingerprint, "error_type", ev.ErrorType, "flood_duration", ev.Duration,
		"failed_probes", ev.FailedProbes, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
	g.emit(ev)
}

// failed counts a failure and decides what becomes of the record; a record
// to keep in Kafka is held already, and held is its *FloodError. A failure
// that trips the guard or fails a probe changes state here.
func (g *floodGuard) failed(ctx context.Context, r *kgo.Record, cause error, f failure, probe bool) (v verdict, fp string, held error) {
	fp = fingerprint.Of(f.typ, f.message, nil)
	stopping := ctx.Err() != nil // the caller is stopping: this says nothing of a flood
	g.mu.Lock()
	switch {
	case g.state == FloodWatching:
		if stopping {
			g.mu.Unlock()
			return deadLetter, fp, nil
		}
	case !probe:
		// Handled before the guard tripped: held like the rest.
		held = g.holdLocked(r, cause)
		g.mu.Unlock()
		return hold, fp, held
	case stopping || f.code == CodeRetry && fp == g.flood.Fingerprint:
		// A failed probe (or one cut short): held, and another one later.
		g.probing = false
		g.failedProbes++
		g.backoff = min(2*g.backoff, g.cfg.MaxProbeBackoff)
		ev := g.flood
		ev.State, ev.FailedProbes, ev.Backoff = FloodTripped, g.failedProbes, g.backoff
		ev.Topic, ev.Partition, ev.Offset = r.Topic, r.Partition, r.Offset
		g.setState(FloodTripped)
		held = g.holdLocked(r, cause)
		g.mu.Unlock()
		g.log.Warn("flood guard probe failed: still holding records in Kafka",
			"fingerprint", ev.Fingerprint, "error_type", f.typ, "message", f.message,
			"failed_probes", ev.FailedProbes, "next_probe_in", ev.Backoff,
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
		g.emit(ev)
		g.clock.AfterFunc(ev.Backoff, g.probe)
		return hold, fp, held
	default:
		// A probe that failed otherwise: not the flood. The record is
		// dead-lettered and counted, and the next record probes.
		g.probing = false
	}

	now := g.clock.Now()
	var failures, records, same int
	if f.code == CodeRetry {
		g.win.fail(now, fp)
		failures, records, same = g.win.counts(now, fp)
	} else {
		g.win.pass(now)
	}
	alike := same > 0 && float64(failures) >= g.cfg.FailureRate*float64(records) &&
		float64(same) >= g.cfg.SameFingerprint*float64(failures)
	if !alike || failures < g.cfg.MinFailures {
		if g.state == FloodProbing {
			g.unpause() // partitions held while the probe ran may offer the next one
		}
		g.mu.Unlock()
		if alike && same >= 2 {
			return deciding, fp, nil
		}
		return deadLetter, fp, nil
	}

	// Trip.
	g.flood = FloodEvent{
		State: FloodTripped, Fingerprint: fp, ErrorType: f.typ, Message: f.message,
		Failures: failures, Records: records,
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
	}
	g.since, g.failedProbes, g.probing = now, 0, false
	g.backoff = g.cfg.ProbeBackoff
	g.win.reset()
	ev := g.flood
	ev.Backoff = g.backoff
	g.setState(FloodTripped)
	held = g.holdLocked(r, cause)
	g.mu.Unlock()
	if g.tripsTotal != nil {
		g.tripsTotal.Inc()
	}
	g.log.Warn("flood guard tripped: holding records in Kafka instead of dead-lettering them",
		"fingerprint", fp, "error_type", f.typ, "message", f.message,
		"failures", failures, "records", records, "window", g.cfg.Window, "probe_in", ev.Backoff,
		"topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
	g.emit(ev)
	g.clock.AfterFunc(ev.Backoff, g.probe)
	return hold, fp, held
}

// probe runs when a backoff ends: the paused partitions are fetched again,
// and the next record is the probe.
func (g *floodGuard) probe() {
	g.mu.Lock()
	ev := FloodEvent{State: FloodProbing, Fingerprint: g.flood.Fingerprint, ErrorType: g.flood.ErrorType,
		Message: g.flood.Message, Failures: g.flood.Failures, Records: g.flood.Records, FailedProbes: g.failedProbes}
	g.mu.Unlock()
	g.log.Info("flood guard probing: fetching the held records again; the next one is a probe",
		"fingerprint", ev.Fingerprint, "error_type", ev.ErrorType, "failed_probes", ev.FailedProbes)
	g.emit(ev) // before any probe can be handled, so that events come in order

	g.mu.Lock()
	defer g.mu.Unlock()
	g.setState(FloodProbing)
	g.unpause()
}

// unpause resumes fetching every partition the guard paused. g.mu is held,
// so that no record is held between the decision and the resume.
func (g *floodGuard) unpause() {
	resume := map[string][]int32{}
	for tp, hp := range g.held {
		if hp.paused {
			hp.paused = false
			resume[tp.topic] = append(resume[tp.topic], tp.partition)
		}
	}
	if len(resume) > 0 {
		g.cl.ResumeFetchPartitions(resume)
	}
}

func (g *floodGuard) setState(s FloodState) {
	g.state = s
	if g.stateGauge != nil {
		g.stateGauge.Set(float64(s))
	}
}

func (g *floodGuard) emit(ev FloodEvent) {
	if g.cfg.OnChange != nil {
		g.cfg.OnChange(ev)
	}
}
