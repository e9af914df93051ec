// Package httpapi is Redrive's HTTP surface (echo): the OJS dead-letter binding,
// bulk tasks, topics as queues, the audit log, compatibility routes for the
// reference FastAPI DLQ, the OpenAPI document, health and readiness, and
// Prometheus metrics. Handlers stay thin: they parse and validate input, call
// records (the one owner of record transitions, and the read side), and
// shape JSON; errors map to the OJS envelope in one place
// (errorHandler). Every route declares its scope and audit action where it is
// registered (routes), which is also what the auth and audit middleware read.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
	"github.com/redrive/redrive/internal/records"
	ssopkg "github.com/redrive/redrive/internal/sso"
)

// BasePath is the prefix of the OJS API routes.
const BasePath = "/ojs/v1"

// CompatPath is the prefix of the routes compatible with the reference DLQ.
const CompatPath = "/api/dlq"

// MaxBodyBytes bounds request bodies; larger ones get 413 naming "body".
const MaxBodyBytes = 1 << 20

// Check is one readiness dependency: it returns nil when healthy.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// Config configures the HTTP API.
type Config struct {
	// Records carries out every record transition and read (required). It
	// holds the reserved topics, wakes the scheduler and the task runner,
	// and publishes the transitions' lifecycle events.
	Records *records.Service
	// ArchiveDisabled says archiving is off (REDRIVE_ARCHIVE_TOPIC=off):
	// records show archive state off.
	ArchiveDisabled bool
	// Queues layers API topic configs over the policy files. Default:
	// Records' resolver.
	Queues *queue.Resolver
	// Keys are the API keys. Required unless AuthDisabled.
	Keys *auth.Keys
	// AuthDisabled serves every route without a key (redrive dev).
	AuthDisabled bool
	// SSO accepts bearer JWTs of the identity provider and console
	// session cookies beside the keys (docs/security.md). Nil: keys only.
	SSO *ssopkg.SSO
	// NextPruneAt is when the pruner runs next; nil or returning nil shows null.
	NextPruneAt func() *time.Time
	// Events publishes queue.* events and streams every lifecycle event at
	// /events (SSE); records publishes the records' own (dead_letter.*).
	// Nil: nothing is published here and /events answers 503.
	Events *events.Publisher
	// Replay lists the policy files' replay rules and runs a pass after one
	// changes through the API. Optional.
	Replay *maintenance.Replayer
	// RequeueWait bounds how long the compatibility requeue routes wait for
	// the scheduler to produce the records. Default 10s.
	RequeueWait time.Duration
	// Ready are the dependencies /readyz checks (Postgres, Kafka, ingest).
	Ready []Check
	// Registry is exposed at /metrics; nil disables the endpoint.
	Registry *prometheus.Registry
	// Now is the time of the services' clock (the app passes its Now): it
	// dates a queue's last hour of activity, as ingest and the scheduler
	// write it, and replay rules. Default: time.Now.
	Now func() time.Time
	// Version is the binary's version, in the manifest and the health
	// check. Default: the build info's (as cmd/redrive reports it), or devel.
	Version string
	// StartedAt is when the server started, for the health check's uptime.
	// Default: Now() when New builds the server.
	StartedAt time.Time
	Logger    *slog.Logger
}

// Server serves the HTTP API.
type Server struct {
	echo   *echo.Echo
	cfg    Config
	rec    *records.Service
	queues *queue.Resolver
	ready  []Check
	log    *slog.Logger
	routes map[string]route // by method + " " + echo path
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Queues == nil {
		cfg.Queues = cfg.Records.Queues()
	}
	if cfg.NextPruneAt == nil {
		cfg.NextPruneAt = func() *time.Time { return nil }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RequeueWait == 0 {
		cfg.RequeueWait = 10 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = buildVersion()
	}
	if cfg.StartedAt.IsZero() {
		cfg.StartedAt = cfg.Now()
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	s := &Server{echo: e, cfg: cfg, rec: cfg.Records, queues: cfg.Queues, ready: cfg.Ready,
		log: log.With("component", "httpapi"), routes: map[string]route{}}
	e.HTTPErrorHandler = s.errorHandler
	e.Use(securityHeaders, requestID, ojsVersion, middleware.Recover(), s.bodyLimit, s.audit, s.authenticate, s.guardWrites, rejectBadText)

	e.GET("/healthz", s.healthz)
	e.HEAD("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.HEAD("/readyz", s.readyz)
	if cfg.Registry != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})))
	}
	s.systemRoutes(e)
	api := e.Group(BasePath)
	api.GET("/openapi.json", s.openAPI)
	routes := slices.Concat(s.apiRoutes(), s.maintenanceRoutes(), s.adminRoutes(), s.workerRoutes(), s.workerLifecycleRoutes())
	for _, r := range append(routes, adminAliases(routes)...) {
		s.add(api, BasePath, r)
	}
	compat := e.Group(CompatPath)
	for _, r := range s.compatRoutes() {
		s.add(compat, CompatPath, r)
	}
	return s
}

// route is one authenticated endpoint: its scope and, for state-changing
// calls, the audit action.
type route struct {
	method, path string
	handler      echo.HandlerFunc
	// scope needed; read for GET, write otherwise.
	scope auth.Scope
	// action names the call in the audit log; empty for read-only calls.
	action string
	// headerOnlyXAPIKey accepts only X-API-Key (the compatibility routes).
	headerOnlyXAPIKey bool
	// perm is what the caller's grants must allow (auth.go). Unset: read
	// on every queue for GET, admin on every queue otherwise.
	perm perm
	// bodyType is the media type a write's body must have; empty:
	// application/json.
	bodyType string
	// maxBody bounds the body; 0: MaxBodyBytes.
	maxBody int64
}

func (s *Server) add(g *echo.Group, prefix string, r route) {
	if r.scope == "" {
		r.scope = auth.ScopeRead
		if r.method != http.MethodGet {
			r.scope = auth.ScopeWrite
		}
	}
	if r.perm == (perm{}) {
		r.perm = needAll(auth.ActionAdmin)
		if r.method == http.MethodGet {
			r.perm = needAll(auth.ActionRead)
		}
	}
	s.routes[r.method+" "+prefix+r.path] = r
	g.Add(r.method, r.path, r.handler)
	if r.method == http.MethodGet && r.path != "/events" {
		// HEAD answers as GET does, without the body (net/http drops it).
		// Not the event stream: it never ends.
		head := r
		head.method = http.MethodHead
		s.routes[head.method+" "+prefix+r.path] = head
		g.Add(http.MethodHead, r.path, r.handler)
	}
}

// apiRoutes are the /ojs/v1 routes. Add new ones here: the scope defaults
// from the method, and an action makes the call audited.
func (s *Server) apiRoutes() []route {
	return []route{
		{method: http.MethodGet, path: "/whoami", handler: s.whoami, perm: needNothing},

		{method: http.MethodGet, path: "/dead-letter", handler: s.listRecords, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: "/dead-letter/stats", handler: s.stats, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: "/dead-letter/error-types", handler: s.listErrorTypes, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: "/dead-letter/filter-keys", handler: s.listFilterKeys, perm: needNothing},
		{method: http.MethodGet, path: "/dead-letter/export", handler: s.exportRecords, action: "dead_letter.export", perm: needSome(auth.ActionRead)},
		{method: http.MethodPost, path: "/dead-letter/import", handler: s.importRecords, action: "dead_letter.import",
			bodyType: ndjsonType, maxBody: MaxImportBytes, perm: needSome(auth.ActionAdmin)},
		{method: http.MethodPost, path: "/dead-letter/retry", handler: s.bulkRetry, action: "dead_letter.bulk_retry", perm: needSome(auth.ActionRetry)},
		{method: http.MethodDelete, path: "/dead-letter", handler: s.bulkPurge, action: "dead_letter.purge", perm: needSome(auth.ActionPurge)},
		{method: http.MethodGet, path: "/dead-letter/:id", handler: s.getRecord, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: "/dead-letter/:id/raw", handler: s.getRaw, perm: needSome(auth.ActionRead)},
		{method: http.MethodPost, path: "/dead-letter/:id/retry", handler: s.retryRecord, action: "dead_letter.retry", perm: needSome(auth.ActionRetry)},
		{method: http.MethodPost, path: "/dead-letter/:id/payload/check", handler: s.checkPayload, scope: auth.ScopeRead, perm: needSome(auth.ActionRead)},
		{method: http.MethodDelete, path: "/dead-letter/:id", handler: s.deleteRecord, action: "dead_letter.delete", perm: needSome(auth.ActionPurge)},

		{method: http.MethodGet, path: "/tasks", handler: s.listTasks, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: "/tasks/:id", handler: s.getTask, perm: needSome(auth.ActionRead)},
		{method: http.MethodPost, path: "/tasks/:id/cancel", handler: s.cancelTask, action: "task.cancel", perm: needSome(auth.ActionRead)},

		{method: http.MethodGet, path: "/queues", handler: s.listQueues, perm: needSome(auth.ActionRead)},
		{method: http.MethodPost, path: "/queues", handler: s.createQueue, action: "queue.create", perm: needSome(auth.ActionConfigure)},
		{method: http.MethodGet, path: "/queues/:name", handler: s.getQueue, perm: needParam(auth.ActionRead, "name")},
		{method: http.MethodDelete, path: "/queues/:name", handler: s.deleteQueue, action: "queue.delete", perm: needParam(auth.ActionConfigure, "name")},
		{method: http.MethodGet, path: "/queues/:name/config", handler: s.getQueueConfig, perm: needParam(auth.ActionRead, "name")},
		{method: http.MethodGet, path: "/queues/:name/activity", handler: s.queueActivity, perm: needParam(auth.ActionRead, "name")},
		{method: http.MethodPut, path: "/queues/:name/config", handler: s.putQueueConfig, action: "queue.config", perm: needParam(auth.ActionConfigure, "name")},
		{method: http.MethodPost, path: "/queues/:name/pause", handler: s.setQueueState(policy.TopicPaused), action: "queue.pause", perm: needParam(auth.ActionConfigure, "name")},
		{method: http.MethodPost, path: "/queues/:name/resume", handler: s.setQueueState(policy.TopicActive), action: "queue.resume", perm: needParam(auth.ActionConfigure, "name")},
		{method: http.MethodPost, path: "/queues/:name/drain", handler: s.setQueueState(policy.TopicDraining), action: "queue.drain", perm: needParam(auth.ActionConfigure, "name")},

		{method: http.MethodGet, path: "/incidents", handler: s.listIncidents, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: "/incidents/:id", handler: s.getIncident, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: "/incidents/:id/activity", handler: s.incidentActivity, perm: needSome(auth.ActionRead)},
		{method: http.MethodPost, path: "/incidents/:id/redrive-when-quiet", handler: s.markQuiet, action: "incident.redrive_when_quiet", perm: needAll(auth.ActionRetry)},
		{method: http.MethodDelete, path: "/incidents/:id/redrive-when-quiet", handler: s.withdrawQuiet, action: "incident.redrive_when_quiet.withdraw", perm: needAll(auth.ActionRetry)},

		{method: http.MethodGet, path: "/activity", handler: s.activity, perm: needSome(auth.ActionRead)},

		{method: http.MethodGet, path: "/audit", handler: s.listAudit, perm: needAudit},
	}
}

// AdminPath is the prefix, under BasePath, of the OJS admin API (admin
// spec §5): the routes adminAliased names are served there too.
const AdminPath = "/admin"

// adminAliased are the routes served under /admin as well (admin spec §5,
// §6.3, §6.4, §11; the official ext-dead-letter cases call them there):
// the same handler, scope, audit action and permission.
var adminAliased = []string{
	"GET /dead-letter", "GET /dead-letter/stats", "POST /dead-letter/retry", "DELETE /dead-letter",
	"GET /dead-letter/:id", "POST /dead-letter/:id/retry", "DELETE /dead-letter/:id",
	"POST /queues/:name/pause", "POST /queues/:name/resume",
	// Admin spec §6.6; backpressure spec §6.2 configures bounds there.
	"PUT /queues/:name/config",
}

// adminAliases copies the routes adminAliased names under AdminPath.
func adminAliases(routes []route) []route {
	var out []route
	for _, r := range routes {
		for _, k := range adminAliased {
			if k == r.method+" "+r.path {
				r.path = AdminPath + r.path
				out = append(out, r)
			}
		}
	}
	return out
}

// compatRoutes are the routes of the reference FastAPI DLQ (/api/dlq).
func (s *Server) compatRoutes() []route {
	return []route{
		{method: http.MethodGet, path: "/stats", handler: s.compatStats, headerOnlyXAPIKey: true},
		{method: http.MethodGet, path: "/jobs/:queue", handler: s.compatJobs, headerOnlyXAPIKey: true},
		{method: http.MethodPost, path: "/requeue/:queue", handler: s.compatRequeue(false), action: "compat.requeue", headerOnlyXAPIKey: true},
		{method: http.MethodPost, path: "/requeue-all/:queue", handler: s.compatRequeue(true), action: "compat.requeue_all", headerOnlyXAPIKey: true},
		{method: http.MethodDelete, path: "/:queue", handler: s.compatClear, action: "compat.clear", headerOnlyXAPIKey: true},
	}
}

// routeOf returns the route the request matched, if it is an authenticated one.
func (s *Server) routeOf(c echo.Context) (route, bool) {
	r, ok := s.routes[c.Request().Method+" "+c.Path()]
	return r, ok
}

// ServeHTTP makes Server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }
