// Package ingest consumes DLQ topics and persists every record in Postgres.
//
// Per batch: poll → decode → apply the retry policy → insert (idempotent on the
// DLQ coordinates) → commit offsets. Offsets are committed only after the rows
// are; a batch that cannot be written is retried, with backoff, until it is —
// ingest pauses rather than drops. It never decides anything about redelivery.
//
// Three batches overlap (pipeline.go): while one batch's records are written
// to Postgres, the batch before it is finished (its incidents recorded, its
// offsets committed, its events published) and the next one is polled and
// decoded. Each stage takes one batch at a time, in poll order, so offsets
// are committed in order.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/tracing"
)

// ErrPaused is reported by Ready while ingest waits for Postgres.
var ErrPaused = errors.New("ingest paused: cannot write to Postgres")

// Ingester is a consumer-group member that stores DLQ records. It is a
// service.Service: Start consumes, Stop leaves the group and closes the
// Kafka client.
type Ingester struct {
	service.Base
	cfg    Config
	client *kgo.Client
	store  *store.Store
	paused atomic.Bool
	// topics follows each DLQ topic's fetch errors (topics.go).
	topics *topicHealth
	// warn logs warnings about records' content, rate-limited.
	warn *warnings
	// closed closes the client once: when the work ends, or at Stop.
	closed sync.Once
	// rebalanceWaits: a rebalance waits for the poll loop to allow it;
	// rebalanceWake ends the poll in progress then.
	rebalanceWaits atomic.Bool
	rebalanceWake  chan struct{}
}

// New creates an Ingester and its Kafka client; Start starts consuming, Stop
// closes the client (started or not).
func New(cfg Config, st *store.Store) (*Ingester, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	in := &Ingester{cfg: cfg, store: st,
		topics:        newTopicHealth(cfg.Logger.With("component", "ingest")),
		warn:          newWarnings(cfg.Logger, cfg.WarnEvery, cfg.Clock.Now),
		rebalanceWake: make(chan struct{}, 1)}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// No rebalance between a poll and the commit of what it returned: a
		// partition is never revoked while its records are being persisted.
		// The poll loop lets a rebalance through once its batches are
		// committed, as soon as one waits (rebalanceBlocked).
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { in.rebalanceBlocked() }),
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("ingest: create kafka client: %w", err)
	}
	in.client = cl
	return in, nil
}

// Ready returns nil while ingest can write, ErrPaused while it waits for Postgres.
func (in *Ingester) Ready() error {
	if in.paused.Load() {
		return ErrPaused
	}
	return nil
}

// Client is the ingest consumer's Kafka client (for health checks).
func (in *Ingester) Client() *kgo.Client { return in.client }

// Name implements service.Service.
func (in *Ingester) Name() string { return "ingest" }

// Start consumes until ctx ends or Stop, then leaves the group and closes
// the client. Records polled but not yet persisted then are not committed,
// so the group delivers them again.
func (in *Ingester) Start(ctx context.Context) error { return in.Go(ctx, in.run) }

// Stop stops consuming and closes the client.
func (in *Ingester) Stop() error {
	err := in.Base.Stop()
	in.close()
	return err
}

// close leaves the group and closes the client, once.
func (in *Ingester) close() {
	in.closed.Do(func() {
		// Leaving the group is a rebalance: unblock it, or Close waits forever.
		in.client.AllowRebalance()
		in.client.Close()
	})
}

func (in *Ingester) run(ctx context.Context) error {
	defer in.close()
	log := in.cfg.Logger.With("component", "ingest")
	log.Info("ingest started", "topics", in.cfg.Topics, "group", in.cfg.Group)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); in.watchTopicIDs(watchCtx, in.cfg.TopicCheckInterval) }()
	defer func() { stopWatch(); <-watched }()
	w := startWriter(ctx, in)
	defer w.stop()
	for {
		pollCtx, cancel := in.pollContext(ctx, w)
		in.topics.polling(cancel)
		fetches := in.client.PollRecords(pollCtx, in.cfg.BatchSize)
		in.topics.polling(nil)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		recreated := in.topics.takeFlagged() // topics deleted and created again, to take up anew
		failing := false
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			failing = true
			if in.topics.failed(topic, partition, err, in.cfg.Clock.Now()) && !slices.Contains(recreated, topic) {
				recreated = append(recreated, topic)
			}
		})
		recs := fetches.Records()
		if len(recs) > 0 {
			if err := w.reserve(ctx); err != nil {
				return w.result(ctx, err)
			}
			// polled is wall time: IngestBatchSeconds measures how long the batch took.
			if err := w.submit(ctx, &job{recs: recs, b: in.decode(recs), polled: time.Now()}); err != nil {
				return w.result(ctx, err)
			}
		} else if failing && len(recreated) == 0 {
			// A fetch error that repeats comes back from every poll at once:
			// do not spin on it.
			clock.Sleep(ctx, in.cfg.Clock, errorPause)
		}
		if len(recreated) > 0 {
			in.rebalanceWaits.Store(false) // readopt lets it through
			if err := in.readopt(ctx, w, recreated, log); err != nil {
				return w.result(ctx, err)
			}
			continue
		}
		// A rebalance waits for every polled batch to be committed: let one
		// through whenever the writer is idle, and as soon as one waits (a
		// short pause in the overlap; a steady stream never lets the writer
		// go idle).
		if w.idle() || in.rebalanceWaits.Swap(false) {
			if err := w.drain(ctx); err != nil {
				return w.result(ctx, err)
			}
			in.client.AllowRebalance()
		}
	}
}

// pollContext is the context of one poll. While a batch is being written,
// polling must not block for good: a rebalance stays blocked until the
// batch is committed and AllowRebalance runs. So besides with ctx, the poll
// ends when the writer goes idle, and when a rebalance waits. The id watch
// ends it too, when a topic was recreated (topics.polling).
func (in *Ingester) pollContext(ctx context.Context, w *writer) (context.Context, context.CancelFunc) {
	idle := w.whenIdle()
	pctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-idle:
		case <-in.rebalanceWake:
		case <-w.done:
		case <-pctx.Done():
		}
		cancel()
	}()
	return pctx, cancel
}

// rebalanceBlocked is the client's signal that a rebalance waits for the
// poll loop to allow it (OnPartitionsCallbackBlocked).
func (in *Ingester) rebalanceBlocked() {
	in.rebalanceWaits.Store(true)
	select {
	case in.rebalanceWake <- struct{}{}:
	default:
	}
}

// topicsOf lists the topics of recs.
func topicsOf(recs []*kgo.Record) []string {
	var out []string
	for _, r := range recs {
		if !slices.Contains(out, r.Topic) {
			out = append(out, r.Topic)
		}
	}
	return out
}

// errorPause is how long the poll loop waits after a poll that returned
// fetch errors and no records.
const errorPause = 250 * time.Millisecond

// storeBatch writes a decoded batch's records (the writer's store stage).
func (in *Ingester) storeBatch(ctx context.Context, j *job) error {
	res, err := untilWritten(ctx, in, j.b, func() (persisted, error) { return in.write(ctx, j.b) })
	if err != nil {
		return err
	}
	j.res = res
	j.lighten(in.cfg.Tracer.On())
	return nil
}

// finishBatch records a stored batch's incidents, then commits its offsets
// and reports it (the writer's finish stage, while the next batch is stored).
func (in *Ingester) finishBatch(ctx context.Context, j *job) error {
	res := &j.res
	seen := res.tally(j.b)
	// After the records: a crash in between leaves the batch uncommitted,
	// and its next consumption records the incidents.
	opened, err := untilWritten(ctx, in, j.b, func() ([]store.IncidentSeen, error) { return in.store.RecordIncidents(ctx, seen) })
	if err != nil {
		return err
	}
	res.opened = opened
	if err := in.client.CommitRecords(ctx, j.recs...); err != nil {
		// Rows are stored; the batch will be consumed again and skipped as duplicates.
		in.topics.commitFailed(topicsOf(j.recs), err, in.cfg.Clock.Now())
	}
	// A statistic: losing it to a Postgres blip must not hold up ingest,
	// and the batch is committed already.
	if err := in.store.RecordActivity(ctx, j.b.now, res.added); err != nil && ctx.Err() == nil {
		in.cfg.Logger.Warn("record queue activity", "component", "ingest", "err", err)
	}
	in.report(j.recs, j.b, *res)
	in.trace(ctx, j)
	if res.due && in.cfg.Wake != nil {
		in.cfg.Wake()
	}
	if j.b.pending && in.cfg.DecodePending != nil {
		in.cfg.DecodePending()
	}
	in.cfg.Metrics.IngestBatchRecords.Observe(float64(len(j.recs)))
	in.cfg.Metrics.IngestBatchSeconds.Observe(time.Since(j.polled).Seconds())
	return nil
}

// persisted is what a batch changed.
type persisted struct {
	fresh   []dlq.Record         // the records inserted: the batch's new ones, then orphaned repeats
	stored  store.InsertResult   // which of fresh were stored (the rest were duplicates)
	changed []*dlq.Record        // existing records a repeat failure or ack changed
	due     bool                 // something now waits for redelivery
	opened  []store.IncidentSeen // incidents the batch opened
	capped  []dlq.Record         // records capacity turned away (QUEUE_FULL, overflow)
	// added counts, per queue and fingerprint, the failures the batch
	// stored: new records and repeat failures of redelivered ones (not acks,
	// not duplicates).
	added map[store.ActivityKey]int64
}

// untilWritten runs a write of batch b until it succeeds or ctx ends,
// pausing ingest (Ready) with backoff while it fails. Every write is
// idempotent, so a retry after a partial failure (or a re-consumed batch)
// changes nothing twice.
func untilWritten[T any](ctx context.Context, in *Ingester, b *batch, write func() (T, error)) (T, error) {
	backoff := in.cfg.RetryBackoffMin
	for {
		res, err := write()
		if err == nil {
			if in.paused.Swap(false) {
				in.cfg.Metrics.IngestPaused.Set(0)
				in.cfg.Logger.Info("ingest resumed: Postgres is writable again", "component", "ingest")
			}
			return res, nil
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		in.cfg.Metrics.IngestWriteErrors.Inc()
		if !in.paused.Swap(true) {
			in.cfg.Metrics.IngestPaused.Set(1)
		}
		in.cfg.Logger.Error("ingest paused: cannot persist batch; retrying, nothing is committed or dropped",
			"component", "ingest", "records", len(b.fresh)+len(b.repeats), "retry_in", backoff, "err", err)
		if !clock.Sleep(ctx, in.cfg.Clock, backoff) {
			return res, ctx.Err()
		}
		backoff = min(backoff*2, in.cfg.RetryBackoffMax)
	}
}

// write stores new records and applies repeat failures and acks. A repeat
// whose record no longer exists (deleted or pruned) is stored as a new record.
func (in *Ingester) write(ctx context.Context, b *batch) (persisted, error) {
	var res persisted
	fresh := b.fresh
	if len(b.repeats) > 0 {
		ids := make([]string, 0, len(b.repeats))
		for i := range b.repeats {
			ids = append(ids, b.repeats[i].RecordID)
		}
		var orphans []dlq.Record
		_, err := in.store.UpdateLocked(ctx, ids, func(records map[string]*dlq.Record) ([]*dlq.Record, error) {
			res.changed, orphans = res.changed[:0], orphans[:0]
			seen := make(map[string]bool)
			for i := range b.repeats {
				f := &b.repeats[i]
				r, ok := records[f.RecordID]
				switch {
				case !ok && !f.Completed:
					queue, unroutable := in.route(f)
					r, _ := in.newRecord(f, queue, unroutable, in.resolve(queue, f.Type), b)
					orphans = append(orphans, r)
				case ok && in.applyRepeat(r, f, b) && !seen[r.ID]:
					seen[r.ID] = true
					res.changed = append(res.changed, r)
				}
			}
			return res.changed, nil
		})
		if err != nil {
			return res, err
		}
		fresh = append(slices.Clip(fresh), orphans...)
	}
	stored, err := in.store.InsertRecords(ctx, fresh)
	if err != nil {
		return res, err
	}
	res.stored = stored
	if len(b.caps) > 0 {
		// Before the records are reported: those past a limit are reported
		// as they end up.
		if res.capped, err = in.enforceCapacity(ctx, b, fresh, stored); err != nil {
			return res, err
		}
	}
	for i := range fresh {
		if reason := stored.Degraded(i); reason != "" {
			r := &fresh[i]
			in.warn.warn("record stored degraded: Postgres refused it as it was", "id", r.ID, "queue", r.Queue,
				"dlq_topic", r.DLQ.Topic, "dlq_partition", r.DLQ.Partition, "dlq_offset", r.DLQ.Offset, "reason", reason)
		}
	}
	res.fresh = fresh
	return res, nil
}

// tally counts what a stored batch added (added, due) and lists the
// incidents its failures belong to. Records stored now come first, so that
// an incident's sample is one of them; duplicates (stored before) still make
// sure it exists.
func (res *persisted) tally(b *batch) []store.IncidentSeen {
	seen := make([]store.IncidentSeen, 0, len(res.fresh)+len(res.changed))
	var dups []store.IncidentSeen
	res.added = map[store.ActivityKey]int64{}
	for i := range res.fresh {
		r := &res.fresh[i]
		res.due = res.due || r.State == dlq.StateRetryable
		if res.stored.New(i) {
			seen = append(seen, incidentOf(r, b.fps))
			res.added[store.ActivityKey{Queue: r.Queue, Fingerprint: r.Fingerprint}]++
		} else {
			dups = append(dups, incidentOf(r, b.fps))
		}
	}
	for _, r := range res.changed {
		res.due = res.due || r.State == dlq.StateRetryable
		if r.State != dlq.StateCompleted {
			seen = append(seen, incidentOf(r, b.fps))
			res.added[store.ActivityKey{Queue: r.Queue, Fingerprint: r.Fingerprint}]++
		}
	}
	seen = append(seen, dups...)
	for i := range seen {
		seen[i].ArrivedAt = b.now // what "redrive when quiet" measures from
	}
	return seen
}

// incidentOf is the incident a record's latest error belongs to.
func incidentOf(r *dlq.Record, fps *fingerprints) store.IncidentSeen {
	last := r.LastError()
	sig, frames := fps.signature(r.Fingerprint, &last)
	return store.IncidentSeen{Fingerprint: r.Fingerprint, ErrorType: last.Type, Signature: sig, Frames: frames,
		Queue: r.Queue, SeenAt: last.OccurredAt, SampleID: r.ID, SampleMessage: last.Message}
}

// report updates metrics and publishes events for a persisted batch.
func (in *Ingester) report(recs []*kgo.Record, b *batch, res persisted) {
	m := in.cfg.Metrics
	for i := range b.fresh {
		m.IngestRecords.WithLabelValues(b.fresh[i].DLQ.Topic, string(b.fresh[i].Format)).Inc()
	}
	// A record is added when it is first stored: in a re-consumed batch, the
	// records stored before are duplicates and were announced then, and the
	// others are announced now.
	added := make([]events.Event, 0, len(b.fresh))
	dup := 0
	for i := range b.fresh {
		r := &b.fresh[i]
		if !res.stored.New(i) {
			dup++
			continue
		}
		m.DeadLetter.Added(r.Queue, r.Type, 1)
		added = append(added, events.Record(events.DeadLetterAdded, events.RecordData{
			ID: r.ID, Queue: r.Queue, RecordKeyData: events.KeyOf(r.Key), Type: r.Type, State: string(r.State), Exhaustion: string(r.Exhaustion),
			ErrorType: r.LastError().Type, Attempt: r.Attempt}))
	}
	if dup > 0 {
		m.IngestDuplicates.WithLabelValues(recs[0].Topic).Add(float64(dup))
	}
	for _, o := range res.opened {
		added = append(added, events.Incident(events.IncidentData{ID: o.Fingerprint, Queue: o.Queue, ErrorType: o.ErrorType,
			Signature: o.Signature, Sample: events.IncidentSample{ID: o.SampleID, Message: o.SampleMessage}}))
	}
	added = append(added, in.reportRules(b, res)...)
	in.cfg.Events.Publish(context.Background(), added...)
	for _, r := range res.changed {
		if r.State == dlq.StateCompleted {
			m.Redelivery.Completed.WithLabelValues(r.Queue).Inc()
		} else {
			m.Redelivery.Joined.WithLabelValues(r.Queue).Inc()
		}
	}
}

func randFloat() float64 { return rand.Float64() }

// trace records, once a batch is committed, a span for each of its DLQ
// records that carries a trace context (process <dlq topic>, kind consumer,
// from the poll to the commit): a child of that context and linked to it,
// naming the record it was stored as or joined.
func (in *Ingester) trace(ctx context.Context, j *job) {
	if !in.cfg.Tracer.On() {
		return
	}
	ids := make(map[dlq.Coord]string, len(j.b.fresh)+len(j.b.repeats))
	for i := range j.b.fresh {
		ids[j.b.fresh[i].DLQ] = j.b.fresh[i].ID
	}
	for i := range j.b.repeats {
		ids[j.b.repeats[i].DLQ] = j.b.repeats[i].RecordID
	}
	for _, r := range j.recs {
		parent := tracing.FromRecord(r)
		if !parent.IsValid() {
			continue
		}
		attrs := append(tracing.Messaging("process", semconv.MessagingOperationTypeProcess, r.Topic),
			semconv.MessagingConsumerGroupName(in.cfg.Group),
			semconv.MessagingDestinationPartitionID(strconv.Itoa(int(r.Partition))),
			semconv.MessagingKafkaOffset(int(r.Offset)))
		if id := ids[dlq.Coord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}]; id != "" {
			attrs = append(attrs, tracing.AttrRecordID.String(id))
		}
		_, span := in.cfg.Tracer.StartAt(ctx, parent, j.polled, "process "+r.Topic, trace.SpanKindConsumer, attrs...)
		tracing.End(span, nil)
	}
}
