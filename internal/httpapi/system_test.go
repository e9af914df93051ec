package httpapi_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/httpapi"
	"github.com/redrive/redrive/internal/pgtest"
)

// manifestJSON is GET /ojs/manifest.
type manifestJSON struct {
	OJSVersion     string `json:"ojs_version"`
	SpecVersion    string `json:"specversion"`
	Implementation struct {
		Name, Version, Language, Homepage string
	} `json:"implementation"`
	ConformanceLevel *int              `json:"conformance_level"`
	Protocols        []string          `json:"protocols"`
	Backend          string            `json:"backend"`
	Capabilities     map[string]bool   `json:"capabilities"`
	Extensions       []string          `json:"extensions"`
	Endpoints        map[string]string `json:"endpoints"`
}

// HTTP binding §21.1: "Implementations MUST serve the manifest endpoint" at
// /ojs/manifest, without the version prefix (§3.1), with the fields §21.2
// requires: ojs_version, implementation (name, version, language),
// conformance_level, protocols ("MUST include http"), backend and
// capabilities. No key is needed: clients read it before anything else. What
// it claims is httpapi.Conformance, the one statement of it.
func TestManifestDescribesWhatRedriveImplements(t *testing.T) {
	b := setup(t)
	r := b.do(t, req{method: http.MethodGet, path: "/ojs/manifest", header: http.Header{"Accept": {"application/openjobspec+json"}}})
	wantStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "application/openjobspec+json" {
		t.Errorf("Content-Type %q, want application/openjobspec+json (HTTP binding §4.3)", ct)
	}
	if r.header.Get("OJS-Version") != "1.0" {
		t.Errorf("OJS-Version %q", r.header.Get("OJS-Version"))
	}
	var m manifestJSON
	r.json(t, &m)
	if m.OJSVersion != "1.0" || m.SpecVersion != "1.0" {
		t.Errorf("ojs_version %q, specversion %q; want 1.0", m.OJSVersion, m.SpecVersion)
	}
	if m.Implementation.Name != "redrive" || m.Implementation.Language != "go" || m.Implementation.Version == "" ||
		!strings.HasPrefix(m.Implementation.Homepage, "https://") {
		t.Errorf("implementation %+v", m.Implementation)
	}
	if m.ConformanceLevel == nil || *m.ConformanceLevel != httpapi.Conformance.Level || !slices.Equal(m.Extensions, httpapi.Conformance.Extensions) {
		t.Errorf("conformance_level %v, extensions %v; want %d, %v", m.ConformanceLevel, m.Extensions, httpapi.Conformance.Level, httpapi.Conformance.Extensions)
	}
	if !slices.Contains(m.Protocols, "http") || m.Backend != "postgres" {
		t.Errorf("protocols %v, backend %q", m.Protocols, m.Backend)
	}
	// Honest flags: what Redrive lacks says false, not nothing.
	if !maps.Equal(m.Capabilities, httpapi.Capabilities) || m.Capabilities["cron_jobs"] || m.Capabilities["workflows"] || !m.Capabilities["dead_letter"] {
		t.Errorf("capabilities %v", m.Capabilities)
	}
	if m.Endpoints["manifest"] != "/ojs/manifest" || m.Endpoints["health"] != "/ojs/v1/health" || m.Endpoints["base_url"] != "/ojs/v1" {
		t.Errorf("endpoints %v", m.Endpoints)
	}
	// Every endpoint it names answers, without a key where the manifest is read.
	for name, path := range m.Endpoints {
		if name == "base_url" || name == "events" {
			continue
		}
		resp, err := http.Get(b.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("endpoint %s (%s): %d", name, path, resp.StatusCode)
		}
	}
}

// healthJSON is GET /ojs/v1/health.
type healthJSON struct {
	Status        string `json:"status"`
	Version       string `json:"version"`
	UptimeSeconds *int64 `json:"uptime_seconds"`
	Backend       struct {
		Type      string `json:"type"`
		Status    string `json:"status"`
		LatencyMS *int64 `json:"latency_ms"`
		Error     string `json:"error"`
	} `json:"backend"`
}

func (b *bundle) health(t *testing.T) (int, healthJSON) {
	t.Helper()
	r := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/health", header: http.Header{"Accept": {"application/openjobspec+json"}}})
	var h healthJSON
	r.json(t, &h)
	if ct := r.header.Get("Content-Type"); ct != "application/openjobspec+json" {
		t.Errorf("health: Content-Type %q", ct)
	}
	return r.status, h
}

// HTTP binding §8.1: GET /ojs/v1/health "MUST" be served, with "at minimum a
// status field"; its examples: 200 {"status": "ok", "version", "uptime_seconds",
// "backend": {"type", "status": "connected", "latency_ms"}} while the backend
// answers, 503 {"status": "degraded", "backend": {"status": "disconnected",
// "error"}} when it does not. Redrive's backend is Postgres: stopped, the
// check says so at once (no key needed, as for a probe); restarted, healthy
// again.
func TestHealthReportsPostgres(t *testing.T) {
	t.Parallel()
	cluster, url := pgtest.NewCluster(t)
	b := start(t, options{dbURL: url})

	status, h := b.health(t)
	if status != http.StatusOK || h.Status != "ok" || h.Version == "" || h.UptimeSeconds == nil || *h.UptimeSeconds < 0 ||
		h.Backend.Type != "postgres" || h.Backend.Status != "connected" || h.Backend.LatencyMS == nil || h.Backend.Error != "" {
		t.Fatalf("healthy: %d %+v", status, h)
	}

	if err := cluster.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = cluster.Resume(context.Background())
		}
	})
	eventually.True(t, "the health check saying Postgres is down", func() bool {
		status, h = b.health(t)
		return status == http.StatusServiceUnavailable
	}, eventually.Within(30*time.Second))
	if h.Status != "degraded" || h.Backend.Status != "disconnected" || h.Backend.Error == "" || h.Backend.LatencyMS != nil {
		t.Fatalf("Postgres down: %+v", h)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	resumed = true
	eventually.True(t, "the health check healthy again", func() bool {
		status, h = b.health(t)
		return status == http.StatusOK && h.Status == "ok" && h.Backend.Status == "connected"
	}, eventually.Within(60*time.Second))
}

// HTTP binding §19: every response carries X-Request-Id; the server
// generates one (§19.1; format req_<UUIDv7>, §19.3) unless the client sent
// its own, which it uses (§19.2) — error.request_id too. A client's id that
// would carry what it likes into headers, logs and the audit log (too
// long, control, space or non-ASCII characters) is replaced, not echoed.
func TestRequestIDIsTheClientsOrANewOne(t *testing.T) {
	b := setup(t)
	generated := regexp.MustCompile(`^req_[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	call := func(path, id string) resp {
		h := http.Header{}
		if id != "" {
			h.Set("X-Request-ID", id)
		}
		return b.do(t, req{method: http.MethodGet, path: path, key: readKey, header: h})
	}
	r := call("/ojs/v1/health", "")
	if got := r.header.Get("X-Request-Id"); !generated.MatchString(got) {
		t.Errorf("no id sent: X-Request-Id %q, want req_<UUIDv7>", got)
	}
	if first, second := r.header.Get("X-Request-Id"), call("/ojs/v1/health", "").header.Get("X-Request-Id"); first == second {
		t.Errorf("two requests got the same id %q", first)
	}
	const mine = "test-req-obs-12345"
	if got := call("/ojs/v1/health", mine).header.Get("X-Request-Id"); got != mine {
		t.Errorf("X-Request-Id %q, want the client's %q", got, mine)
	}
	longest := strings.Repeat("r", httpapi.MaxRequestIDBytes)
	if got := call("/ojs/manifest", longest).header.Get("X-Request-Id"); got != longest {
		t.Errorf("an id of %d bytes was replaced by %q", httpapi.MaxRequestIDBytes, got)
	}
	// An error carries the same id in its body.
	r = call("/ojs/v1/dead-letter?limit=0", "req_client-019414d4-ffff-7000-a000-123456789abc")
	if e := r.err(t); e.Error.RequestID != "req_client-019414d4-ffff-7000-a000-123456789abc" ||
		r.header.Get("X-Request-Id") != e.Error.RequestID {
		t.Errorf("error: request_id %q, header %q", e.Error.RequestID, r.header.Get("X-Request-Id"))
	}
	for _, hostile := range []string{strings.Repeat("x", httpapi.MaxRequestIDBytes+1), "a\tb", "a b", "id-ü"} {
		r := call("/ojs/v1/dead-letter?limit=0", hostile)
		got := r.header.Get("X-Request-Id")
		if !generated.MatchString(got) {
			t.Errorf("client id %q: X-Request-Id %q, want a new req_<UUIDv7>", hostile, got)
		}
		if e := r.err(t); e.Error.RequestID != got {
			t.Errorf("client id %q: error.request_id %q, header %q", hostile, e.Error.RequestID, got)
		}
	}
}

// The system endpoints refuse parameters they do not take, naming them.
func TestSystemEndpointsRefuseUnknownParameters(t *testing.T) {
	b := setup(t)
	for _, path := range []string{"/ojs/manifest?verbose=1", "/ojs/v1/health?verbose=1"} {
		r := b.do(t, req{method: http.MethodGet, path: path})
		wantError(t, path, r, http.StatusBadRequest, "invalid_request", "verbose")
	}
	// A raw check of the manifest as JSON, as a client without types reads it.
	var raw map[string]json.RawMessage
	b.do(t, req{method: http.MethodGet, path: "/ojs/manifest"}).json(t, &raw)
	if string(raw["conformance_level"]) != "1" {
		t.Errorf("conformance_level %s, want the integer 1", raw["conformance_level"])
	}
}
