package redeliver

import (
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/recreate"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

// outbox is what the Scheduler and the Archiver share: the service, the
// Kafka client they produce with and own (Stop closes it, started or not),
// the resetter that keeps that client working when a topic is deleted and
// created again, their loop's wake-up and their failure log.
type outbox struct {
	service.Base
	store  *store.Store
	client *kgo.Client
	resets *recreate.Resetter
	wake   service.Wake
	fails  *failureLog
	log    *slog.Logger
	closed sync.Once
}

// newOutbox returns the outbox of component on st, producing with cl.
func newOutbox(component string, st *store.Store, cl *kgo.Client, logger *slog.Logger, clk clock.Clock) outbox {
	log := logger.With("component", component)
	resets := recreate.NewResetter(log)
	resets.Attach(cl)
	return outbox{store: st, client: cl, resets: resets, wake: service.NewWake(), fails: newFailureLog(log, clk), log: log}
}

// Wake makes the loop look for due work now, instead of at its next due
// time or poll. Safe to call from anywhere, never blocks.
func (o *outbox) Wake() { o.wake.Signal() }

// Stop ends the loop (a batch being produced is finished and settled first)
// and closes the Kafka client.
func (o *outbox) Stop() error {
	err := o.Base.Stop()
	o.closed.Do(o.client.Close)
	return err
}
