package app

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/config"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/recreate"
	"github.com/redrive/redrive/internal/service"
)

// maint holds the background upkeep: lifecycle events, the pruner, replay
// rules and the gauges read from Postgres and Kafka.
type maint struct {
	events       *events.Publisher
	eventsClient *kgo.Client // nil when the events topic is off
	pruner       *maintenance.Pruner
	replayer     *maintenance.Replayer
	gauges       *maintenance.Gauges
	quiet        *maintenance.QuietRedriver
}

// clientOpts returns kopts plus the kprom hooks exporting the client's metrics
// as client=name. It never aliases kopts.
func (a *App) clientOpts(kopts []kgo.Opt, name string) []kgo.Opt {
	return slices.Concat(kopts, []kgo.Opt{metrics.KafkaClientOpts(a.metrics.Registry, name)})
}

// EventsTopic is the events topic the setting names: empty means
// "<first dlq topic>.events", "off" none.
func EventsTopic(cfg config.Config) string {
	switch cfg.EventsTopic {
	case config.Off:
		return ""
	case "":
		return cfg.DLQTopics[0] + ".events"
	}
	return cfg.EventsTopic
}

// initEvents creates the lifecycle-event publisher (before the components
// that publish).
func (a *App) initEvents(kopts []kgo.Opt) error {
	cfg := a.opts.Config
	m := &maint{}
	a.maint = m
	a.metrics.DeadLetter.SetClock(a.clock.Now)
	topic := EventsTopic(cfg)
	if topic != "" {
		// An events topic deleted and created again is purged from the
		// client at its first failed event, so the next ones reach the new topic.
		resets := recreate.NewResetter(a.log.With("component", "events"))
		var err error
		m.eventsClient, err = kgo.NewClient(slices.Concat(a.clientOpts(kopts, "events"), events.ProducerOpts(),
			[]kgo.Opt{kgo.WithHooks(resets.Hook())})...)
		if err != nil {
			return fmt.Errorf("events producer: %w", err)
		}
		resets.Attach(m.eventsClient)
	}
	dl := a.metrics.DeadLetter
	m.events = events.New(events.Config{Client: m.eventsClient, Topic: topic, Clock: a.clock, Logger: a.log, Metrics: a.metrics.Events,
		Streams: events.StreamConfig{MaxStreams: cfg.EventsMaxStreams, MaxStreamsPerOwner: cfg.EventsMaxStreamsPerKey, WriteTimeout: cfg.EventsWriteTimeout},
		// Manual retries are counted where the API announces them, one event per record.
		Observe: func(ev *events.Event) {
			if ev.Type == events.DeadLetterRetried {
				dl.Retried(ev.Queue, 1)
			}
		},
		// Events are written once for every subscriber: a key masked from
		// anyone is masked in them (docs/security.md, "Data masking").
		MaskKey: func(queue, prefix string, truncated bool) bool {
			set := a.policies.Current()
			if !set.Masks() {
				return false
			}
			r := set.Masking(queue)
			return r != nil && (truncated && len(r.Keys) > 0 || r.KeyMasked([]byte(prefix)))
		}})
	// The publisher flushes to the client when it stops; the client closes after.
	a.services.Add(service.WithRelease(m.events, m.closeClient))
	return nil
}

// initMaintenance creates the maintenance services and adds them to
// a.services. It needs a.store, a.queues, a.sched, a.archiver, a.ingester
// and initEvents.
func (a *App) initMaintenance() error {
	cfg := a.opts.Config
	m := a.maint
	var err error
	resolve := func(q string) policy.Topic { return a.queues.Resolve(q, "") }
	var checkArchive func(context.Context) error
	if a.archiver != nil {
		checkArchive = a.archiver.CheckTopics
	}
	deps := maintenance.Deps{Store: a.store, Policy: resolve, Events: m.events, Metrics: a.metrics.DeadLetter,
		Clock: a.clock, Logger: a.log}
	m.pruner, err = maintenance.NewPruner(maintenance.PrunerConfig{
		Deps: deps, Interval: cfg.PruneInterval,
		Archiving: a.archiver != nil, WakeArchiver: a.wake, CheckArchive: checkArchive,
	})
	if err != nil {
		return err
	}
	m.replayer, err = maintenance.NewReplayer(maintenance.ReplayerConfig{
		Deps: deps, Interval: cfg.ReplayInterval, Wake: a.sched.Wake,
		// Records replays: rules leave Redrive's own topics (and Kafka's
		// internal ones) alone, as bulk retries do.
		Records: a.records,
	})
	if err != nil {
		return err
	}
	m.gauges, err = maintenance.NewGauges(maintenance.GaugesConfig{
		Store: a.store, Metrics: a.metrics.DeadLetter, Admin: kadm.NewClient(a.ingester.Client()),
		Group: cfg.Group, Topics: cfg.DLQTopics, Clock: a.clock, Logger: a.log,
	})
	if err != nil {
		return err
	}
	m.quiet, err = maintenance.NewQuietRedriver(maintenance.QuietConfig{Records: a.records, Store: a.store, Clock: a.clock, Logger: a.log})
	if err != nil {
		return err
	}
	backfill := maintenance.BackfillConfig{Store: a.store, Clock: a.clock, Logger: a.log}
	a.services.Add(m.pruner, m.replayer, m.gauges, m.quiet, a.compactCounts(5*time.Second),
		maintenance.NewFingerprintBackfill(backfill), maintenance.NewFailedAtFill(backfill))
	return nil
}

// closeClient closes the events client, if there is one.
func (m *maint) closeClient() {
	if m.eventsClient != nil {
		m.eventsClient.Close()
	}
}

// Events is the App's lifecycle-event publisher (for components that emit events).
func (a *App) Events() *events.Publisher { return a.maint.events }

// Pruner is the App's pruner (tests drive it with RunOnce).
func (a *App) Pruner() *maintenance.Pruner { return a.maint.pruner }

// Replayer is the App's replay-rules engine (tests drive it with RunOnce).
func (a *App) Replayer() *maintenance.Replayer { return a.maint.replayer }

// Quiet starts the retries of incidents marked "redrive when quiet" (tests
// call RunOnce).
func (a *App) Quiet() *maintenance.QuietRedriver { return a.maint.quiet }

// Gauges refreshes the gauges read from Postgres and Kafka (tests call RunOnce).
func (a *App) Gauges() *maintenance.Gauges { return a.maint.gauges }
