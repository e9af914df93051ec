// Package app wires the processor together — Postgres, ingest, the HTTP API —
// from a config.Config. `redrive serve`, `redrive dev` and end-to-end tests all
// run the same App.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/config"
	"github.com/redrive/redrive/internal/console"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/httpapi"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/task"
)

// Options configure an App beyond config.Config.
type Options struct {
	Config config.Config
	Logger *slog.Logger
	// ExtraKafkaOpts are appended to the Kafka client options (tests shorten fetch waits).
	ExtraKafkaOpts []kgo.Opt
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// RequeueWait bounds how long the compatibility requeue routes wait for
	// Kafka before answering 503. Default: 10s.
	RequeueWait time.Duration
}

// App is a running processor.
type App struct {
	opts     Options
	log      *slog.Logger
	pool     *pgxpool.Pool
	ingester *ingest.Ingester
	sched    *redeliver.Scheduler
	archiver *redeliver.Archiver // nil when archiving is off
	policies *policy.Watcher
	hangup   chan os.Signal
	queues   *queue.Resolver // API topic configs over the policy files
	tasks    *task.Runner
	store    *store.Store
	server   *http.Server
	listener net.Listener
	metrics  *metrics.Metrics
	maint    *maint // events, pruner, replay rules, gauges
}

// New connects to Postgres, checks (or applies) migrations, creates the ingest
// consumer and binds the HTTP listener. Run starts the work.
func New(ctx context.Context, opts Options) (*App, error) {
	cfg := opts.Config
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.DatabaseURL == "" {
		return nil, errors.New("REDRIVE_DATABASE_URL is required")
	}
	pool, err := newPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	a := &App{opts: opts, log: log, pool: pool, metrics: metrics.New()}
	if err := a.init(ctx); err != nil {
		if a.hangup != nil {
			signal.Stop(a.hangup)
		}
		pool.Close()
		return nil, err
	}
	return a, nil
}

func (a *App) init(ctx context.Context) error {
	cfg := a.opts.Config
	if err := checkSchema(ctx, a.pool, cfg.MigrateOnStart, a.log); err != nil {
		return err
	}
	kopts, err := cfg.KafkaOpts()
	if err != nil {
		return err
	}
	kopts = append(kopts, a.opts.ExtraKafkaOpts...)
	st := store.New(a.pool)
	// The topics Redrive never produces a redelivery to: its own and Kafka's internal ones.
	reserved := dlq.NewReservedTopics(reservedTopics(cfg)...)
	limits := policy.Limits{MaxAttempts: cfg.RetryMaxAttempts, MinInterval: cfg.RetryMinInterval}
	if a.policies, err = limits.NewWatcher(cfg.PoliciesDir, reserved, a.log); err != nil {
		return fmt.Errorf("policies: %w", err)
	}
	// Registered now, not in Run: a SIGHUP that arrives in between must reload
	// the policies, not kill the process.
	a.hangup = make(chan os.Signal, 1)
	signal.Notify(a.hangup, syscall.SIGHUP)
	keys, err := apiKeys(cfg, a.log)
	if err != nil {
		return err
	}
	a.store = st
	a.queues = queue.New(a.policies.Current, st, a.log).Within(limits)
	a.queues.Reserve(reserved)
	if err := a.queues.Refresh(ctx); err != nil {
		return fmt.Errorf("queue configs: %w", err)
	}
	a.boundLabels()
	if err := a.initEvents(kopts); err != nil {
		return err
	}
	a.sched, err = redeliver.New(redeliver.Config{
		Brokers:    cfg.KafkaBrokers,
		ClientOpts: a.clientOpts(kopts, "redeliver"),
		Policies:   a.queues,
		Reserved:   reserved,
		Now:        a.opts.Now,
		Logger:     a.log,
		Metrics:    a.metrics,
	}, st)
	if err != nil {
		return err
	}
	if cfg.ArchiveTopic != config.Off {
		a.archiver, err = redeliver.NewArchiver(redeliver.ArchiverConfig{
			Brokers:    cfg.KafkaBrokers,
			ClientOpts: a.clientOpts(kopts, "archiver"),
			Topic:      archiveTopic(cfg.ArchiveTopic),
			DLQTopics:  cfg.DLQTopics,
			Now:        a.opts.Now,
			Logger:     a.log,
			Metrics:    a.metrics,
		}, st)
		if err != nil {
			a.sched.Close()
			return err
		}
	}
	a.ingester, err = ingest.New(ingest.Config{
		Brokers:     cfg.KafkaBrokers,
		Topics:      cfg.DLQTopics,
		Group:       cfg.Group,
		Policies:    a.queues,
		Reserved:    dlq.NewReservedTopics(reservedTopics(cfg)...),
		RetryLimits: limits,
		Wake:        a.wake,
		Events:      a.maint.events,
		ClientOpts:  append(a.clientOpts(kopts, "ingest"), cfg.GroupOpts()...), // group options: the ingest consumer only
		Now:         a.opts.Now,
		Logger:      a.log,
		Metrics:     a.metrics,
	}, st)
	if err != nil {
		a.closeProducers()
		return err
	}
	a.tasks, err = task.New(task.Config{Wake: a.sched.Wake, Logger: a.log, OwnTopics: reservedTopics(cfg),
		OnBatch: func(kind string, rows []store.BatchRow) {
			a.maint.events.Publish(context.Background(), httpapi.BatchEvents(kind, rows)...)
		}}, st)
	if err != nil {
		a.closeProducers()
		return err
	}
	if err := a.initMaintenance(); err != nil {
		a.closeProducers()
		return err
	}
	api := httpapi.New(httpapi.Config{
		Reserved:        reserved,
		Store:           st,
		ArchiveDisabled: a.archiver == nil,
		Queues:          a.queues,
		Keys:            keys,
		AuthDisabled:    cfg.AuthDisabled,
		Wake:            a.sched.Wake,
		KickTasks:       a.tasks.Kick,
		RequeueWait:     a.opts.RequeueWait,
		NextPruneAt:     a.maint.pruner.NextPruneAt,
		Events:          a.maint.events,
		Replay:          a.maint.replayer,
		Registry:        a.metrics.Registry,
		Now:             a.opts.Now,
		Logger:          a.log,
		Ready: []httpapi.Check{
			{Name: "postgres", Check: st.Ping},
			{Name: "kafka", Check: a.ingester.Client().Ping},
			{Name: "ingest", Check: func(context.Context) error { return a.ingester.Ready() }},
			{Name: "dlq_topics", Check: a.checkDLQTopics},
		},
	})
	a.listener, err = (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	// A client that never finishes its request is cut off; a response that
	// cannot be written in time is dropped. The event stream lifts both
	// deadlines for itself. Idle keep-alive connections are closed.
	// The console's files are public (its API calls carry the key); the
	// rest is the API.
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, console.Handler(console.Config{AuthDisabled: cfg.AuthDisabled}))
	mux.Handle("/", api)
	a.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: cfg.HTTPReadTimeout, WriteTimeout: cfg.HTTPWriteTimeout,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	return nil
}

// boundLabels sets the metrics' queue limit and what operators declared:
// queues named in a policy file or configured through the API, and record
// types a policy file overrides, get their own label values first.
func (a *App) boundLabels() {
	l := a.metrics.Labels
	l.SetMaxQueues(a.opts.Config.MetricsMaxQueues)
	l.SetDeclared(metrics.Declared{
		Queue: func(q string) bool {
			if a.policies.Current().Declares(q) {
				return true
			}
			_, _, ok := a.queues.Config(q)
			return ok && q != queue.DefaultName
		},
		Type: func(t string) bool { return a.policies.Current().DeclaresType(t) },
	})
}

// checkSchema applies pending migrations when asked to, and otherwise refuses
// to start on a schema that is not up to date.
func checkSchema(ctx context.Context, pool *pgxpool.Pool, migrate bool, log *slog.Logger) error {
	m, err := store.NewMigrator(pool, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	if migrate {
		n, err := m.Up(ctx)
		if err != nil {
			return err
		}
		log.Info("schema migrated", "component", "app", "applied", n)
		return nil
	}
	pending, err := m.Pending(ctx)
	if err != nil {
		return fmt.Errorf("check schema version: %w", err)
	}
	if pending {
		return errors.New("the database schema is not up to date: run `redrive migrate up` or set REDRIVE_MIGRATE_ON_START=true")
	}
	return nil
}

// Addr is the HTTP API's address (useful with ":0").
func (a *App) Addr() string { return a.listener.Addr().String() }

// Metrics exposes the App's metrics.
func (a *App) Metrics() *metrics.Metrics { return a.metrics }

// Run serves until ctx is done, then shuts down gracefully within the
// configured grace period. It returns the first component failure.
func (a *App) Run(ctx context.Context) error {
	defer a.pool.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.ingester.Run(gctx) })
	g.Go(func() error { a.ensureTopics(gctx); return nil }) // archive and events topics, in the background
	g.Go(func() error { return a.sched.Run(gctx) })
	if a.archiver != nil {
		g.Go(func() error { return a.archiver.Run(gctx) })
	}
	g.Go(func() error { a.policies.Run(gctx, 2*time.Second); return nil })
	g.Go(func() error { a.queues.Run(gctx, 3*time.Second); return nil })
	g.Go(func() error { return a.tasks.Run(gctx) })
	a.runMaintenance(gctx, g)
	g.Go(func() error { a.compactCounts(gctx, 5*time.Second); return nil })
	g.Go(func() error { maintenance.BackfillFingerprints(gctx, a.store, a.log); return nil })
	g.Go(func() error { maintenance.FillFailedAt(gctx, a.store, a.log); return nil })
	g.Go(func() error { a.reloadOnHangup(gctx); return nil })
	g.Go(func() error {
		a.log.Info("http api listening", "component", "app", "addr", a.Addr())
		if err := a.server.Serve(a.listener); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		grace := a.opts.Config.ShutdownGrace
		if grace <= 0 {
			grace = 15 * time.Second
		}
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		return a.server.Shutdown(sctx)
	})
	return g.Wait()
}

// reloadOnHangup reloads the policy files on SIGHUP; a broken file keeps the
// last good policies (the watcher logs why).
func (a *App) reloadOnHangup(ctx context.Context) {
	defer signal.Stop(a.hangup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.hangup:
			_ = a.policies.Reload()
		}
	}
}

// archiveTopic names archive topics from the REDRIVE_ARCHIVE_TOPIC setting:
// empty means "<dlq topic>.archive", anything else is the one archive topic.
func archiveTopic(setting string) func(string) string {
	if setting == "" || setting == config.Off {
		return redeliver.DefaultArchiveTopic
	}
	return func(string) string { return setting }
}

// Scheduler is the App's redelivery scheduler (tests drive it with RunOnce).
func (a *App) Scheduler() *redeliver.Scheduler { return a.sched }

// Archiver is the App's archiver, nil when archiving is off (tests drive it
// with RunOnce).
func (a *App) Archiver() *redeliver.Archiver { return a.archiver }

// wake tells the scheduler and the archiver that records may be due.
func (a *App) wake() {
	a.sched.Wake()
	if a.archiver != nil {
		a.archiver.Wake()
	}
}

// closeProducers closes the Kafka producers of a half-initialised App.
func (a *App) closeProducers() {
	a.sched.Close()
	if a.archiver != nil {
		a.archiver.Close()
	}
}

// Policies is the App's policy watcher.
func (a *App) Policies() *policy.Watcher { return a.policies }

// apiKeys loads the API keys file. Without one the API refuses to start
// unless authentication is explicitly disabled (redrive dev).
func apiKeys(cfg config.Config, log *slog.Logger) (*auth.Keys, error) {
	if cfg.APIKeysFile == "" {
		if !cfg.AuthDisabled {
			return nil, errors.New("REDRIVE_API_KEYS_FILE is required: create keys with `redrive apikey new`, " +
				"or set REDRIVE_AUTH_DISABLED=true to serve the API without authentication (never in production)")
		}
		log.Warn("AUTH DISABLED: the API is served without API keys; never expose it", "component", "app")
		return nil, nil
	}
	keys, err := auth.Load(cfg.APIKeysFile)
	if err != nil {
		return nil, err
	}
	if cfg.AuthDisabled {
		log.Warn("AUTH DISABLED although REDRIVE_API_KEYS_FILE is set: keys are ignored", "component", "app")
	} else if keys.Len() == 0 {
		log.Warn("the API keys file holds no key: every API call will be refused (add one with `redrive apikey new`)",
			"component", "app", "file", cfg.APIKeysFile)
	}
	return keys, nil
}

// compactCounts folds the record statistics table and the queue activity
// table every interval, so that stats stay cheap however much is written.
func (a *App) compactCounts(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.store.CompactCounts(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("compact record counts", "component", "app", "err", err)
			}
			if err := a.store.CompactActivity(ctx, a.now()); err != nil && ctx.Err() == nil {
				a.log.Warn("compact queue activity", "component", "app", "err", err)
			}
		}
	}
}

// now reads the App's clock.
func (a *App) now() time.Time {
	if a.opts.Now != nil {
		return a.opts.Now()
	}
	return time.Now()
}

// Queues is the App's resolver of topic configs (API configs over the files).
func (a *App) Queues() *queue.Resolver { return a.queues }

// minPoolConns is the pool size unless the URL sets pool_max_conns: ingest,
// each scheduler worker, the pruner, the replayer and bulk tasks each hold a
// connection while they work, and the API needs some left. pgxpool's own
// default (max(4, CPUs)) starves them on small machines.
const minPoolConns = 20

// newPool connects to Postgres with a pool large enough for every component.
func newPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("REDRIVE_DATABASE_URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, minPoolConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return pool, nil
}
