package httpapi

import (
	"net/http"
	"runtime/debug"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// systemRoutes registers the unversioned, unauthenticated discovery and
// probe endpoints: the conformance manifest (OJS HTTP binding §21) and the
// health check (§8.1). Neither takes a key: they are served before
// authentication ever looks (only the routes of Server.add are
// authenticated).
func (s *Server) systemRoutes(e *echo.Echo) {
	e.GET(ManifestPath, s.manifest)
	e.HEAD(ManifestPath, s.manifest)
	e.GET(HealthPath, s.health)
	e.HEAD(HealthPath, s.health)
}

// ManifestPath is the conformance manifest's path, outside the versioned base
// path (HTTP binding §3.1: "The conformance manifest endpoint is the sole
// exception: it MUST be served at /ojs/manifest").
const ManifestPath = "/ojs/manifest"

// HealthPath is the OJS health check (HTTP binding §8.1).
const HealthPath = BasePath + "/health"

// Homepage is Redrive's home, in the manifest.
const Homepage = "https://github.com/redrive/redrive"

// Conformance is what Redrive claims in its manifest (GET /ojs/manifest):
// the highest OJS conformance level it passes (HTTP binding §21.2,
// conformance_level) and the extensions it implements (extensions). It is
// the one place these are stated in code: the README's conformance section
// must say the same level and list — change them together.
var Conformance = struct {
	// Level is the conformance level, 0 to 4.
	Level int
	// Extensions are the OJS extensions implemented, by their spec names.
	Extensions []string
}{
	Level:      1,
	Extensions: []string{"dead-letter", "backpressure", "observability", "admin-api", "queue-config"},
}

// Capabilities are the manifest's feature flags (HTTP binding §21.2): what
// Redrive does, and says it does not.
var Capabilities = map[string]bool{
	"dead_letter":       true,
	"pause_resume":      true,
	"batch_enqueue":     true,
	"delayed_jobs":      true,
	"priority_queues":   true,
	"unique_jobs":       true,
	"cron_jobs":         false,
	"workflows":         false,
	"schema_validation": false,
	"rate_limiting":     false,
	"job_ttl":           false,
}

// buildVersion is the binary's version as cmd/redrive reports it (its
// tracing resource): the main module's version from the build info, or
// "devel".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// manifestJSON is the conformance manifest (HTTP binding §21.1, §21.2).
type manifestJSON struct {
	OJSVersion string `json:"ojs_version"`
	// SpecVersion repeats ojs_version under the name the official
	// conformance case L0-OPS-019 reads.
	SpecVersion      string             `json:"specversion"`
	Implementation   implementationJSON `json:"implementation"`
	ConformanceLevel int                `json:"conformance_level"`
	Protocols        []string           `json:"protocols"`
	Backend          string             `json:"backend"`
	Capabilities     map[string]bool    `json:"capabilities"`
	Extensions       []string           `json:"extensions"`
	Endpoints        map[string]string  `json:"endpoints"`
}

type implementationJSON struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Language string `json:"language"`
	Homepage string `json:"homepage"`
}

// manifest serves GET /ojs/manifest. endpoints.base_url is the base path,
// not an absolute URL: the Host a client sent is its own to trust, not the
// server's to repeat.
func (s *Server) manifest(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	ojsMedia(c)
	return c.JSON(http.StatusOK, manifestJSON{
		OJSVersion: OJSVersion, SpecVersion: OJSVersion,
		Implementation:   implementationJSON{Name: "redrive", Version: s.cfg.Version, Language: "go", Homepage: Homepage},
		ConformanceLevel: Conformance.Level,
		Protocols:        []string{"http"},
		Backend:          "postgres",
		Capabilities:     Capabilities,
		Extensions:       Conformance.Extensions,
		Endpoints:        s.endpoints(),
	})
}

// endpoints are the manifest's endpoints: the base path and the paths of
// the manifest, the health check, the event list and stream, this API's
// OpenAPI document and, when served, the Prometheus metrics.
func (s *Server) endpoints() map[string]string {
	out := map[string]string{"base_url": BasePath, "manifest": ManifestPath, "health": HealthPath,
		"events": BasePath + "/events", "openapi": BasePath + "/openapi.json"}
	if s.cfg.Registry != nil {
		out["metrics"] = "/metrics"
	}
	return out
}

// MaxRequestIDBytes bounds a client's X-Request-Id that is kept and echoed.
const MaxRequestIDBytes = 128

// requestID gives every request an id, in X-Request-Id of the response and
// error.request_id (HTTP binding §19.1): the client's own when it sent one
// (§19.2), if it is 1 to MaxRequestIDBytes printable ASCII characters
// without spaces; otherwise — none, or one too long or with control,
// space or non-ASCII characters, which would go into headers, logs and the
// audit log as they came — a new one, req_<UUIDv7> (§19.3).
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rid := c.Request().Header.Get(echo.HeaderXRequestID)
		if !validRequestID(rid) {
			rid = "req_" + uuid.Must(uuid.NewV7()).String()
			// Whoever reads the request's header later reads the id in use.
			c.Request().Header.Set(echo.HeaderXRequestID, rid)
		}
		c.Response().Header().Set(echo.HeaderXRequestID, rid)
		return next(c)
	}
}

// validRequestID reports whether a client's request id may be kept.
func validRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDBytes {
		return false
	}
	for i := range len(id) {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}
