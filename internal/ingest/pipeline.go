package ingest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// job is one polled and decoded batch on its way to Postgres.
type job struct {
	recs   []*kgo.Record
	b      *batch
	polled time.Time
}

// writer persists and commits batches one at a time, in the order they were
// submitted, while the poll loop decodes the next one. The hand-off is
// unbuffered: at most two batches are in memory, the one being written and
// the one waiting to be.
type writer struct {
	in   *Ingester
	jobs chan *job
	done chan struct{} // closed when the writer's goroutine ends

	mu       sync.Mutex
	inFlight int           // submitted and not yet committed
	idleCh   chan struct{} // closed when inFlight drops to 0; nil while idle
	err      error         // why the writer stopped
}

func startWriter(ctx context.Context, in *Ingester) *writer {
	w := &writer{in: in, jobs: make(chan *job), done: make(chan struct{})}
	go w.run(ctx)
	return w
}

func (w *writer) run(ctx context.Context) {
	defer close(w.done)
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-w.jobs:
			if err := w.in.handleBatch(ctx, j); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
			w.mu.Lock()
			if w.inFlight--; w.inFlight == 0 && w.idleCh != nil {
				close(w.idleCh)
				w.idleCh = nil
			}
			w.mu.Unlock()
		}
	}
}

// submit hands a batch to the writer, waiting while it is busy with the
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

// idle reports whether every submitted batch is committed.
func (w *writer) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inFlight == 0
}

// untilIdle returns a context that ends with ctx or when the writer has
// committed everything submitted so far (at once when it already has).
func (w *writer) untilIdle(ctx context.Context) (context.Context, context.CancelFunc) {
	w.mu.Lock()
	idle := w.idleCh
	w.mu.Unlock()
	if idle == nil {
		return ctx, func() {}
	}
	pctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-idle:
		case <-w.done:
		case <-pctx.Done():
		}
		cancel()
	}()
	return pctx, cancel
}

// drain waits until every submitted batch is committed.
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

// stop waits for the writer to end. Run returns only when its ctx is done or
// the writer failed, so the writer is ending either way; waiting for it keeps
// the client open until its last commit.
func (w *writer) stop() { <-w.done }
