package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

// GaugesConfig configures Gauges. Zero fields take the defaults noted.
type GaugesConfig struct {
	// Store is required.
	Store *store.Store
	// Metrics receives the values. Required.
	Metrics *metrics.DeadLetter
	// Admin and Group, when set, give the consumer-group lag on Topics.
	Admin  *kadm.Client
	Group  string
	Topics []string
	// Interval between refreshes. Default 15 s.
	Interval time.Duration
	// Clock is what Start waits on. Default: clock.Wall.
	Clock  clock.Clock
	Logger *slog.Logger
}

// Gauges keeps the gauges that are read from Postgres and Kafka rather than
// counted in process (ojs_dead_letter_total, oldest age, consumer lag,
// redeliveries due), so
// that they are right after a restart and drop to 0 when a queue is emptied.
// Every replica refreshes its own; the queries are cheap (statistics table,
// index probes). It is a service.Service: Start refreshes every Interval.
type Gauges struct {
	service.Base
	cfg GaugesConfig
	log *slog.Logger
}

// NewGauges returns Gauges; Start them, or call RunOnce.
func NewGauges(cfg GaugesConfig) (*Gauges, error) {
	if cfg.Store == nil || cfg.Metrics == nil {
		return nil, errors.New("gauges: Store and Metrics are required")
	}
	cfg.Interval = positiveOr(cfg.Interval, 15*time.Second)
	cfg.Logger = orLogger(cfg.Logger)
	cfg.Clock = clock.Or(cfg.Clock)
	return &Gauges{cfg: cfg, log: cfg.Logger.With("component", "gauges")}, nil
}

// Name implements service.Service.
func (g *Gauges) Name() string { return "gauges" }

// Start refreshes at once and then every Interval until ctx ends or Stop.
func (g *Gauges) Start(ctx context.Context) error {
	loop := &service.Loop{Clock: g.cfg.Clock, Logger: g.log, What: "refresh gauges", Interval: g.cfg.Interval,
		Pass: func(ctx context.Context) (service.Next, error) { return service.Next{}, g.RunOnce(ctx) }}
	return g.Go(ctx, loop.Run)
}

// RunOnce refreshes the gauges once.
func (g *Gauges) RunOnce(ctx context.Context) error {
	m := g.cfg.Metrics
	depth, err := g.cfg.Store.DeadLetterDepth(ctx)
	if err != nil {
		m.StatsErrors.Inc()
		return err
	}
	out := make(map[string]metrics.QueueDepth, len(depth))
	for q, d := range depth {
		out[q] = metrics.QueueDepth{Count: d.Count, Oldest: d.Oldest}
	}
	m.SetDepth(out)
	counts, err := g.cfg.Store.RecordCounts(ctx)
	if err != nil {
		m.StatsErrors.Inc()
		return err
	}
	rows := make([]metrics.RecordCount, len(counts))
	for i, c := range counts {
		rows[i] = metrics.RecordCount{Queue: c.Queue, State: c.State, Exhaustion: c.Exhaustion, ErrorType: c.ErrorType, N: c.N}
	}
	m.SetRecordCounts(rows)
	incidents, err := g.cfg.Store.IncidentsPerQueue(ctx)
	if err != nil {
		m.StatsErrors.Inc()
		return err
	}
	m.SetIncidents(incidents)
	due, err := g.cfg.Store.RedeliveryDue(ctx, g.cfg.Clock.Now())
	if err != nil {
		m.StatsErrors.Inc()
		return err
	}
	m.SetRedeliveryDue(due)
	if g.cfg.Admin == nil || g.cfg.Group == "" {
		return nil
	}
	return g.lag(ctx)
}

func (g *Gauges) lag(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lags, err := g.cfg.Admin.Lag(lctx, g.cfg.Group)
	if err != nil {
		g.cfg.Metrics.StatsErrors.Inc()
		return err
	}
	l, ok := lags[g.cfg.Group]
	if !ok {
		return nil
	}
	if err := l.Error(); err != nil {
		g.cfg.Metrics.StatsErrors.Inc()
		return err
	}
	sum := map[string]int64{}
	for _, t := range g.cfg.Topics {
		sum[t] = 0
	}
	for topic, parts := range l.Lag {
		if _, want := sum[topic]; !want {
			continue
		}
		for _, p := range parts {
			if p.Lag > 0 {
				sum[topic] += p.Lag
			}
		}
	}
	for t, n := range sum {
		g.cfg.Metrics.ConsumerLag.WithLabelValues(t).Set(float64(n))
	}
	return nil
}
