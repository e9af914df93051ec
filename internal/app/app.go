// Package app wires the processor together — Postgres, ingest, the HTTP API —
// from a config.Config. `redrive serve`, `redrive dev` and end-to-end tests all
// run the same App.
//
// Every background part is a service.Service on one clock.Clock. New builds
// them in order, adding each to the App's service.Group as soon as it holds
// anything (a Kafka client, the listener), so that a failure half-way
// releases what was opened; Run starts the group and stops it all at the end.
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
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/config"
	"github.com/redrive/redrive/internal/console"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/httpapi"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/sso"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/task"
	"github.com/redrive/redrive/internal/tracing"
)

// Options configure an App beyond config.Config.
type Options struct {
	Config config.Config
	Logger *slog.Logger
	// ExtraKafkaOpts are appended to the Kafka client options (tests shorten fetch waits).
	ExtraKafkaOpts []kgo.Opt
	// Clock is the time of every service: what they stamp, measure
	// retention and due times at, and wait on. Default: clock.Wall.
	Clock clock.Clock
	// RequeueWait bounds how long the compatibility requeue routes wait for
	// Kafka before answering 503. Default: 10s.
	RequeueWait time.Duration
	// TracerProvider receives the spans of ingest, redelivery, retries and
	// bulk retries (docs/operations.md, Tracing). Default: nil, tracing off;
	// serve builds it from the OTEL_* environment (otelenv.FromEnv).
	TracerProvider trace.TracerProvider
}

// App is a running processor.
type App struct {
	opts     Options
	clock    clock.Clock
	log      *slog.Logger
	ingester *ingest.Ingester
	sched    *redeliver.Scheduler
	archiver *redeliver.Archiver // nil when archiving is off
	policies *policy.Watcher
	hangup   chan os.Signal
	queues   *queue.Resolver // API topic configs over the policy files
	tasks    *task.Runner
	store    *store.Store
	records  *records.Service // every record transition, and the API's reads
	server   *http.Server
	listener net.Listener
	metrics  *metrics.Metrics
	tracer   *tracing.Tracer // nil: tracing off
	maint    *maint          // events, pruner, replay rules, gauges
	// schemas and decoder decode Schema Registry payloads; nil when no
	// registry is configured.
	schemas *schema.Registry
	decoder *maintenance.SchemaDecoder
	// services are the background parts, in the order they start; New adds
	// each as soon as it holds anything.
	services service.Group
}

// New connects to Postgres, checks (or applies) migrations, creates the
// services and their Kafka clients and binds the HTTP listener. Run starts
// the work. When New fails, everything it opened is closed again.
func New(ctx context.Context, opts Options) (*App, error) {
	cfg := opts.Config
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.DatabaseURL == "" {
		return nil, errors.New("REDRIVE_DATABASE_URL is required")
	}
	st, err := openStore(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	a := &App{opts: opts, clock: clock.Or(opts.Clock), log: log, store: st, metrics: metrics.New(),
		tracer: tracing.New(opts.TracerProvider)}
	if err := a.init(ctx); err != nil {
		_ = a.services.Stop() // never started: each releases what it holds
		st.Close()
		return nil, err
	}
	return a, nil
}

func (a *App) init(ctx context.Context) error {
	cfg := a.opts.Config
	if err := checkSchema(ctx, a.store, cfg.MigrateOnStart, a.log); err != nil {
		return err
	}
	kopts, err := cfg.KafkaOpts()
	if err != nil {
		return err
	}
	kopts = append(kopts, a.opts.ExtraKafkaOpts...)
	st := a.store
	// The topics Redrive never produces a redelivery to: its own and Kafka's internal ones.
	reserved := dlq.NewReservedTopics(reservedTopics(cfg)...)
	limits := policy.Limits{MaxAttempts: cfg.RetryMaxAttempts, MinInterval: cfg.RetryMinInterval}
	if a.policies, err = limits.NewWatcher(cfg.PoliciesDir, reserved, a.log); err != nil {
		return fmt.Errorf("policies: %w", err)
	}
	a.services.Add(a.policies.Poller(2*time.Second, a.clock))
	// Registered now, not in Run: a SIGHUP that arrives in between must reload
	// the policies, not kill the process.
	a.hangup = make(chan os.Signal, 1)
	signal.Notify(a.hangup, syscall.SIGHUP)
	a.services.Add(service.NewFunc("policy reload on SIGHUP", a.reloadOnHangup, func() { signal.Stop(a.hangup) }))
	keys, err := apiKeys(cfg, a.log)
	if err != nil {
		return err
	}
	signOn, err := singleSignOn(ctx, cfg, a.clock.Now, a.log)
	if err != nil {
		return err
	}
	a.queues = queue.New(a.policies.Current, st, a.log).Within(limits)
	a.queues.Reserve(reserved)
	if err := a.queues.Refresh(ctx); err != nil {
		return fmt.Errorf("queue configs: %w", err)
	}
	a.services.Add(a.queues.Refresher(3*time.Second, a.clock))
	a.boundLabels()
	if err := a.initEvents(kopts); err != nil {
		return err
	}
	a.sched, err = redeliver.New(redeliver.Config{
		Brokers:    cfg.KafkaBrokers,
		ClientOpts: a.clientOpts(kopts, "redeliver"),
		Policies:   a.queues,
		Reserved:   reserved,
		Clock:      a.clock,
		Logger:     a.log,
		Metrics:    a.metrics,
		Tracer:     a.tracer,
	}, st)
	if err != nil {
		return err
	}
	a.services.Add(a.sched)
	if cfg.ArchiveTopic != config.Off {
		a.archiver, err = redeliver.NewArchiver(redeliver.ArchiverConfig{
			Brokers:    cfg.KafkaBrokers,
			ClientOpts: a.clientOpts(kopts, "archiver"),
			Topic:      archiveTopic(cfg.ArchiveTopic, cfg.DLQTopics),
			DLQTopics:  cfg.DLQTopics,
			Clock:      a.clock,
			Logger:     a.log,
			Metrics:    a.metrics,
		}, st)
		if err != nil {
			return err
		}
		a.services.Add(a.archiver)
	}
	if err := a.initSchemas(); err != nil {
		return err
	}
	a.ingester, err = ingest.New(ingest.Config{
		Brokers:       cfg.KafkaBrokers,
		Topics:        cfg.DLQTopics,
		Group:         cfg.Group,
		Policies:      a.queues,
		Reserved:      dlq.NewReservedTopics(reservedTopics(cfg)...),
		RetryLimits:   limits,
		Environment:   cfg.Environment,
		Wake:          a.wake,
		Schemas:       a.schemas,
		DecodePending: a.decodePending(),
		Events:        a.maint.events,
		ClientOpts:    append(a.clientOpts(kopts, "ingest"), cfg.GroupOpts()...), // group options: the ingest consumer only
		Clock:         a.clock,
		Logger:        a.log,
		Metrics:       a.metrics,
		Tracer:        a.tracer,
	}, st)
	if err != nil {
		return err
	}
	a.services.Add(a.ingester, a.topicSetup()) // the archive and events topics, in the background
	if a.decoder != nil {
		a.services.Add(a.decoder)
	}
	jobMetrics := metrics.NewOJS(a.metrics.Registry, a.metrics.Labels) // OJS observability §8
	a.records, err = records.New(records.Config{Store: st, Reserved: reserved, Queues: a.queues, Events: a.maint.events,
		Wake: a.sched.Wake, KickTasks: func() { a.tasks.Kick() }, Schemas: a.schemas, Logger: a.log, Tracer: a.tracer,
		JobMetrics: jobMetrics, Exports: records.NewExportSlots(cfg.ExportsMax, cfg.ExportsMaxPerKey)})
	if err != nil {
		return err
	}
	jobMetrics.SetDepthSource(func(ctx context.Context) (map[string]map[string]int64, error) {
		return a.records.JobDepth(ctx, a.clock.Now())
	}, func(err error) {
		a.metrics.DeadLetter.StatsErrors.Inc()
		a.log.Warn("reading ojs_queue_depth failed; it shows its last values", "component", "metrics", "err", err)
	})
	retryScope := a.records.RetryScope()
	a.tasks, err = task.New(task.Config{Wake: a.sched.Wake, Logger: a.log, RetryScope: &retryScope, PatchRecord: a.records.PatchForTask,
		OnBatch: func(t *store.Task, rows []store.BatchRow) {
			a.records.PublishTaskBatch(context.Background(), t, rows)
			a.records.TraceBatch(context.Background(), t, rows)
		},
		OnCanary: func(t *store.Task) { a.records.PublishCanary(context.Background(), t) },
		OnQueueDeleted: func(t *store.Task, queue string, _ bool, remaining int64) {
			a.records.QueueDeleted(context.Background(), t, queue, remaining)
		},
		Clock: a.clock}, st)
	if err != nil {
		return err
	}
	a.services.Add(a.tasks)
	if err := a.initMaintenance(); err != nil {
		return err
	}
	api := httpapi.New(httpapi.Config{
		Records:         a.records,
		ArchiveDisabled: a.archiver == nil,
		Queues:          a.queues,
		Keys:            keys,
		AuthDisabled:    cfg.AuthDisabled,
		SSO:             signOn,
		RequeueWait:     a.opts.RequeueWait,
		NextPruneAt:     a.maint.pruner.NextPruneAt,
		Events:          a.maint.events,
		Replay:          a.maint.replayer,
		Registry:        a.metrics.Registry,
		Now:             a.clock.Now,
		Logger:          a.log,
		Ready: []httpapi.Check{
			{Name: "postgres", Check: st.Ping},
			{Name: "kafka", Check: a.ingester.Client().Ping},
			{Name: "ingest", Check: func(context.Context) error { return a.ingester.Ready() }},
			{Name: "dlq_topics", Check: a.checkDLQTopics},
		},
	})
	listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	a.listener = listener
	// A client that never finishes its request is cut off; a response that
	// cannot be written in time is dropped. The event stream lifts both
	// deadlines for itself. Idle keep-alive connections are closed.
	// The console's files are public (its API calls carry the key); the
	// rest is the API.
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, console.Handler(console.Config{AuthDisabled: cfg.AuthDisabled, TraceURL: cfg.TraceURL,
		Login: signOn.LoginEnabled(), KafkaBrokers: cfg.KafkaBrokers}))
	if signOn != nil {
		mux.Handle("/auth/", signOn.Handler())
	}
	mux.Handle("/", api)
	a.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: cfg.HTTPReadTimeout, WriteTimeout: cfg.HTTPWriteTimeout,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	a.services.Add(&httpServer{srv: a.server, listener: a.listener, grace: cfg.ShutdownGrace, log: a.log})
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
func checkSchema(ctx context.Context, st *store.Store, migrate bool, log *slog.Logger) error {
	m, err := st.Migrator(nil)
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

// Run starts every service and serves until ctx is done or a service
// fails, then stops them all (the HTTP server gracefully, within the
// configured grace period) and closes the Postgres pool. It returns the
// first failure.
func (a *App) Run(ctx context.Context) error {
	defer a.store.Close()
	if err := a.services.Start(ctx); err != nil {
		return err // Start stopped every service
	}
	if err := a.services.Wait(ctx); err != nil {
		_ = a.services.Stop()
		return err
	}
	return a.services.Stop()
}

// reloadOnHangup reloads the policy files on each SIGHUP until ctx ends; a
// broken file keeps the last good policies (the watcher logs why).
func (a *App) reloadOnHangup(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.hangup:
			_ = a.policies.Reload()
		}
	}
}

// httpServer serves the API on the listener New bound, as a service.
type httpServer struct {
	service.Base
	srv      *http.Server
	listener net.Listener
	grace    time.Duration // for the requests in flight at Stop; default 15s
	log      *slog.Logger
	closed   sync.Once
}

func (s *httpServer) Name() string { return "http server" }

// Start serves until ctx ends or Stop, then shuts the server down: it stops
// listening and waits, within the grace period, for the requests in flight.
func (s *httpServer) Start(ctx context.Context) error {
	return s.Go(ctx, func(ctx context.Context) error {
		s.log.Info("http api listening", "component", "app", "addr", s.listener.Addr().String())
		served := make(chan error, 1)
		go func() { served <- s.srv.Serve(s.listener) }()
		select {
		case err := <-served:
			return fmt.Errorf("http server: %w", err)
		case <-ctx.Done():
		}
		grace := s.grace
		if grace <= 0 {
			grace = 15 * time.Second
		}
		// Wall time: a deadline for the network, not a wait on the clock.
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		err := s.srv.Shutdown(sctx)
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, fmt.Errorf("http server: %w", serr))
		}
		return err
	})
}

// Stop shuts the server down, or closes the listener of a server that never
// served.
func (s *httpServer) Stop() error {
	err := s.Base.Stop()
	s.closed.Do(func() { _ = s.listener.Close() })
	return err
}

// archiveTopic names archive topics from the REDRIVE_ARCHIVE_TOPIC setting:
// empty means "<dlq topic>.archive", anything else is the one archive topic.
// A job published over HTTP was read from no DLQ topic: it is archived with
// the first DLQ topic's records.
func archiveTopic(setting string, dlqTopics []string) func(string) string {
	if setting == "" || setting == config.Off {
		return func(dlq string) string {
			if dlq == "" && len(dlqTopics) > 0 {
				dlq = dlqTopics[0]
			}
			return redeliver.DefaultArchiveTopic(dlq)
		}
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

// Policies is the App's policy watcher.
func (a *App) Policies() *policy.Watcher { return a.policies }

// apiKeys loads the API keys file. Without one the API refuses to start
// unless authentication is explicitly disabled (redrive dev).
func apiKeys(cfg config.Config, log *slog.Logger) (*auth.Keys, error) {
	if cfg.APIKeysFile == "" {
		if cfg.OIDC.Enabled() && !cfg.AuthDisabled {
			return nil, nil // people and machines sign on with the identity provider
		}
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

// singleSignOn builds OIDC single sign-on from the settings and the roles
// file; nil when it is off (or authentication is disabled).
func singleSignOn(ctx context.Context, cfg config.Config, now func() time.Time, log *slog.Logger) (*sso.SSO, error) {
	if !cfg.OIDC.Enabled() {
		return nil, nil
	}
	if cfg.AuthDisabled {
		log.Warn("AUTH DISABLED although REDRIVE_OIDC_ISSUER is set: single sign-on is ignored", "component", "app")
		return nil, nil
	}
	roles, err := auth.LoadRoles(cfg.RolesFile)
	if err != nil {
		return nil, err
	}
	o := cfg.OIDC
	if o.SessionKey == "" && o.RedirectURL != "" {
		log.Warn("REDRIVE_OIDC_SESSION_KEY is not set: console sessions end at a restart and work on this replica only", "component", "app")
	}
	return sso.New(ctx, sso.Config{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret, RedirectURL: o.RedirectURL,
		Scopes: o.Scopes, GroupsClaim: o.GroupsClaim, Roles: roles, SessionKey: o.SessionKeyBytes(), SessionTTL: o.SessionTTL,
		Now: now, Logger: log})
}

// compactCounts is the service that folds the record statistics table and
// the queue activity table every interval, so that stats stay cheap however
// much is written.
func (a *App) compactCounts(interval time.Duration) service.Service {
	return service.NewLoop("compact counts", &service.Loop{Clock: a.clock, Logger: a.log.With("component", "app"),
		What: "compact counts", Interval: interval, Delay: true, Pass: func(ctx context.Context) (service.Next, error) {
			var errs []error
			if err := a.store.CompactCounts(ctx); err != nil {
				errs = append(errs, fmt.Errorf("compact record counts: %w", err))
			}
			if err := a.store.CompactActivity(ctx, a.clock.Now()); err != nil {
				errs = append(errs, fmt.Errorf("compact queue activity: %w", err))
			}
			return service.Next{}, errors.Join(errs...)
		}})
}

// Queues is the App's resolver of topic configs (API configs over the files).
func (a *App) Queues() *queue.Resolver { return a.queues }

// minPoolConns is the pool size unless the URL sets pool_max_conns: ingest,
// each scheduler worker, the pruner, the replayer and bulk tasks each hold a
// connection while they work, and the API needs some left. pgxpool's own
// default (max(4, CPUs)) starves them on small machines.
const minPoolConns = 20

// openStore connects to Postgres with a pool large enough for every component.
func openStore(ctx context.Context, url string) (*store.Store, error) {
	st, err := store.Open(ctx, url, store.OpenOptions{MinMaxConns: minPoolConns})
	var urlErr *store.URLError
	switch {
	case errors.As(err, &urlErr):
		return nil, fmt.Errorf("REDRIVE_DATABASE_URL: %w", err)
	case err != nil:
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return st, nil
}
