package ingest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
)

// job is one polled and decoded batch on its way to Postgres.
type job struct {
	recs   []*kgo.Record
	b      *batch
	polled time.Time
	res    persisted // what storing it changed, for the finisher
}

// lighten drops from a stored batch what its finish stage does not need, so
// that the Kafka fetches it was decoded from can be collected while it waits
// to be finished: its records' values, headers and meta, its repeat
// failures but for their coordinates, and its polled records but for their
// coordinates (unless the spans of tracing, which read their headers, are
// wanted). Keys are kept (events carry them), copied out of the fetch.
func (j *job) lighten(tracing bool) {
	lightenRecords(j.b.fresh)
	if f := j.res.fresh; len(f) > 0 && (len(j.b.fresh) == 0 || &f[0] != &j.b.fresh[0]) {
		lightenRecords(f) // a copy, with orphaned repeats after the batch's records
	}
	for i := range j.b.repeats {
		f := &j.b.repeats[i]
		*f = dlq.Failure{DLQ: f.DLQ, RecordID: f.RecordID}
	}
	if tracing {
		return
	}
	marks := make([]kgo.Record, len(j.recs))
	for i, rec := range j.recs {
		marks[i] = kgo.Record{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
			LeaderEpoch: rec.LeaderEpoch, Timestamp: rec.Timestamp}
		j.recs[i] = &marks[i]
	}
}

func lightenRecords(rs []dlq.Record) {
	for i := range rs {
		r := &rs[i]
		r.Key, r.Value, r.Headers, r.Meta = bytes.Clone(r.Key), nil, nil, nil
	}
}

// writer takes batches through two stages, each one batch at a time and in
// poll order: the store stage writes a batch's records (one transaction),
// then hands it to the finish stage, which records its incidents, commits
// its offsets and reports it while the store stage writes the next one.
// Postgres is then not left idle for the round trips that follow a batch's
// commit. A batch's offsets are committed after its records and incidents,
// and after every earlier batch's.
//
// Memory: the hand-offs are unbuffered, and the poll loop decodes a batch
// only while at most one other is unfinished (reserve). So at most two
// batches are held whole, the one being stored and one decoded and waiting,
// as with a single stage, and one more is held light (lighten) while it is
// finished.
type writer struct {
	in     *Ingester
	jobs   chan *job
	stored chan *job
	done   chan struct{} // closed when both stages have ended
	slots  chan struct{} // a token per batch reserved and not finished

	mu       sync.Mutex
	inFlight int           // submitted and not yet finished
	idleCh   chan struct{} // closed when inFlight drops to 0; nil while idle
	err      error         // why the writer stopped
}

func startWriter(ctx context.Context, in *Ingester) *writer {
	w := &writer{in: in, jobs: make(chan *job), stored: make(chan *job), done: make(chan struct{}),
		slots: make(chan struct{}, 2)}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		w.finish(ctx)
	}()
	go func() {
		w.store(ctx)
		close(w.stored)
		<-finished
		close(w.done)
	}()
	return w
}

// store is the first stage: it writes each batch's records.
func (w *writer) store(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-w.jobs:
			if err := w.in.storeBatch(ctx, j); err != nil {
				w.fail(err)
				return
			}
			select {
			case w.stored <- j:
			case <-ctx.Done():
				return
			}
		}
	}
}

// finish is the second stage: it completes each stored batch.
func (w *writer) finish(ctx context.Context) {
	for j := range w.stored {
		if err := w.in.finishBatch(ctx, j); err != nil {
			w.fail(err)
			return
		}
		w.mu.Lock()
		if w.inFlight--; w.inFlight == 0 && w.idleCh != nil {
			close(w.idleCh)
			w.idleCh = nil
		}
		w.mu.Unlock()
		<-w.slots
	}
}

// fail records why a stage stopped (the first reason).
func (w *writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// reserve waits, before the poll loop decodes a batch, until at most one
// batch is unfinished. It fails when the writer has stopped.
func (w *writer) reserve(ctx context.Context) error {
	select {
	case w.slots <- struct{}{}:
		return nil
	case <-w.done:
		return w.stopped()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// submit hands a reserved batch to the writer, waiting while it is busy with the
// previous one. It fails when the writer has stopped.
func (w *writer) submit(ctx context.Context, j *job) error {
	w.mu.Lock()
	if w.inFlight++; w.idleCh == nil {
		w.idleCh = make(chan struct{})
	}
	w.mu.Unlock()
	select {
	case w.jobs <- j:
		return nil
	case <-w.done:
		return w.stopped()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// idle reports whether every submitted batch is finished: stored,
// committed and reported.
func (w *writer) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inFlight == 0
}

// whenIdle is closed when the writer has finished everything submitted so
// far; nil (never ready) when it already has.
func (w *writer) whenIdle() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.idleCh
}

// drain waits until every submitted batch is finished.
func (w *writer) drain(ctx context.Context) error {
	w.mu.Lock()
	idle := w.idleCh
	w.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-w.done:
		return w.stopped()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopped is the error the writer ended with.
func (w *writer) stopped() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return errors.New("ingest writer stopped")
}

// result turns a pipeline error into Run's: none when ctx ended (shutdown).
func (w *writer) result(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// stop waits for both stages to end. Run returns only when its ctx is done
// or the writer failed, so the writer is ending either way; waiting for it
// keeps the client open until its last commit.
func (w *writer) stop() { <-w.done }
