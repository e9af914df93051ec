// Package httpapi is Redrive's HTTP surface (echo): the OJS dead-letter binding,
// health and readiness, and Prometheus metrics. Handlers stay thin: they parse
// and validate input, call the store, and shape JSON; errors map to the OJS
// envelope in one place (errorHandler).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redrive/redrive/internal/store"
)

// BasePath is the prefix of the OJS API routes.
const BasePath = "/ojs/v1"

// Check is one readiness dependency: it returns nil when healthy.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// Config configures the HTTP API.
type Config struct {
	Store *store.Store
	// Ready are the dependencies /readyz checks (Postgres, Kafka, ingest).
	Ready []Check
	// Registry is exposed at /metrics; nil disables the endpoint.
	Registry *prometheus.Registry
	Logger   *slog.Logger
}

// Server serves the HTTP API.
type Server struct {
	echo  *echo.Echo
	store *store.Store
	ready []Check
	log   *slog.Logger
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	s := &Server{echo: e, store: cfg.Store, ready: cfg.Ready, log: log.With("component", "httpapi")}
	e.HTTPErrorHandler = s.errorHandler
	e.Use(middleware.RequestID(), middleware.Recover(), middleware.BodyLimit("1M"))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if cfg.Registry != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})))
	}
	api := e.Group(BasePath)
	api.GET("/dead-letter", s.listRecords)
	api.GET("/dead-letter/:id", s.getRecord)
	return s
}

// ServeHTTP makes Server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }
