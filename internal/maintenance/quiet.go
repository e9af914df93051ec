package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

// lockQuiet is the advisory lock of the quiet-incident trigger.
const lockQuiet int64 = 0x7265647269766505

// quietBatch bounds the retries one pass starts.
const quietBatch = 100

// QuietConfig configures a QuietRedriver. Zero fields take the defaults noted.
type QuietConfig struct {
	// Records starts the retries (records.Service.StartQuiet). Required.
	Records *records.Service
	// Store holds the advisory lock. Required.
	Store *store.Store
	// Interval between passes. Default 15 s.
	Interval time.Duration
	// Clock is the time quiet is measured at, and what Start waits on.
	// Default: clock.Wall.
	Clock  clock.Clock
	Logger *slog.Logger
}

// QuietRedriver starts the canary retry of each incident marked "resolved,
// redrive when quiet" once no failure of it has arrived for the time asked
// (counted from the later of the request and the incident's latest
// failure), as the operator who asked. A pass runs on one replica at a time
// (the maintenance leader: a Postgres advisory lock), and a request is
// marked started in the transaction that creates its task, so no incident
// is retried twice. It is a service.Service: Start runs a pass every Interval.
type QuietRedriver struct {
	service.Base
	cfg QuietConfig
	log *slog.Logger
}

// NewQuietRedriver returns a QuietRedriver; Start it, or call RunOnce.
func NewQuietRedriver(cfg QuietConfig) (*QuietRedriver, error) {
	if cfg.Records == nil || cfg.Store == nil {
		return nil, errors.New("quiet redriver: Records and Store are required")
	}
	cfg.Interval = positiveOr(cfg.Interval, 15*time.Second)
	cfg.Clock = clock.Or(cfg.Clock)
	cfg.Logger = orLogger(cfg.Logger)
	return &QuietRedriver{cfg: cfg, log: cfg.Logger.With("component", "quiet")}, nil
}

// Name implements service.Service.
func (q *QuietRedriver) Name() string { return "quiet incidents" }

// Start runs a pass every Interval until ctx ends or Stop.
func (q *QuietRedriver) Start(ctx context.Context) error {
	loop := &service.Loop{Clock: q.cfg.Clock, Logger: q.log, What: "quiet incidents", Interval: q.cfg.Interval,
		Pass: func(ctx context.Context) (service.Next, error) {
			_, err := q.RunOnce(ctx)
			return service.Next{}, err
		}}
	return q.Go(ctx, loop.Run)
}

// QuietResult is what one pass did.
type QuietResult struct {
	// Leader is false when another replica was running a pass.
	Leader bool
	// Started are the tasks started, one per quiet incident.
	Started []*records.Task
}

// RunOnce starts the retries of the incidents quiet long enough now,
// unless another replica is running a pass.
func (q *QuietRedriver) RunOnce(ctx context.Context) (*QuietResult, error) {
	res := &QuietResult{}
	lock, ok, err := q.cfg.Store.TryAdvisoryLock(ctx, lockQuiet)
	if err != nil || !ok {
		return res, err
	}
	defer lock.Release()
	res.Leader = true
	now := q.cfg.Clock.Now()
	due, err := q.cfg.Records.QuietDue(ctx, now, quietBatch)
	if err != nil {
		return res, err
	}
	var errs []error
	for i := range due {
		t, err := q.cfg.Records.StartQuiet(ctx, &due[i], now)
		switch {
		case errors.Is(err, store.ErrConflict):
			continue // withdrawn or replaced meanwhile
		case err != nil:
			errs = append(errs, err)
			continue
		}
		res.Started = append(res.Started, t)
	}
	return res, errors.Join(errs...)
}
