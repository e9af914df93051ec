package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// healthz is liveness: the process is up and serving.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz checks every dependency; any failure answers 503 with what failed,
// never a fake "ok".
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	checks := make(map[string]string, len(s.ready))
	status := http.StatusOK
	for _, chk := range s.ready {
		if err := chk.Check(ctx); err != nil {
			checks[chk.Name] = err.Error()
			status = http.StatusServiceUnavailable
			continue
		}
		checks[chk.Name] = "ok"
	}
	if status != http.StatusOK {
		return &APIError{Status: status, Code: CodeBackendError, Message: "not ready", Details: map[string]any{"checks": checks}}
	}
	return c.JSON(status, map[string]any{"status": "ok", "checks": checks})
}

// PostgresCheck names the readiness check of Postgres, the OJS backend the
// health check reports on.
const PostgresCheck = "postgres"

// healthTimeout bounds the health check's ping of Postgres.
const healthTimeout = 2 * time.Second

// healthJSON is GET /ojs/v1/health (HTTP binding §8.1).
type healthJSON struct {
	// Status is ok when the backend answers, degraded (with 503) when not.
	Status string `json:"status"`
	// Version is the binary's version.
	Version string `json:"version"`
	// UptimeSeconds counts from the API's start.
	UptimeSeconds int64       `json:"uptime_seconds"`
	Backend       backendJSON `json:"backend"`
}

type backendJSON struct {
	// Type is postgres, where jobs and dead letters are kept.
	Type string `json:"type"`
	// Status is connected or disconnected (the spec's examples' values).
	Status string `json:"status"`
	// LatencyMS is how long the ping took, when it answered.
	LatencyMS *int64 `json:"latency_ms,omitempty"`
	// Error is why it did not.
	Error string `json:"error,omitempty"`
}

// maxHealthError bounds the error the health check repeats.
const maxHealthError = 300

// health serves GET /ojs/v1/health: the server's status, version and
// uptime, and its backend's (Postgres) connection — 200 with status ok when
// Postgres answers a ping, 503 with status degraded and the error when it
// does not (HTTP binding §8.1). Kafka and ingest are /readyz's to report.
func (s *Server) health(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	out := healthJSON{Status: "ok", Version: s.cfg.Version,
		UptimeSeconds: max(int64(s.cfg.Now().Sub(s.cfg.StartedAt)/time.Second), 0),
		Backend:       backendJSON{Type: "postgres", Status: "connected"}}
	status := http.StatusOK
	// The app always passes the Postgres check (Config.Ready); a server
	// built without one has nothing to ping.
	for _, chk := range s.ready {
		if chk.Name != PostgresCheck {
			continue
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), healthTimeout)
		began := time.Now() // how long the ping took: wall time is what is measured
		err := chk.Check(ctx)
		took := time.Since(began)
		cancel()
		if err != nil {
			out.Status, out.Backend.Status, out.Backend.Error = "degraded", "disconnected", clipError(err.Error())
			status = http.StatusServiceUnavailable
			break
		}
		ms := took.Milliseconds()
		out.Backend.LatencyMS = &ms
	}
	ojsMedia(c)
	return c.JSON(status, out)
}

// clipError cuts an error message for a probe's answer.
func clipError(s string) string {
	if len(s) <= maxHealthError {
		return s
	}
	return strings.ToValidUTF8(s[:maxHealthError], "") + "…"
}
