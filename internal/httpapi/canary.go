package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
)

// parseCanary reads a canary object; a mistake is a 400 naming its field.
func parseCanary(raw json.RawMessage, prefix string) (*records.Canary, error) {
	c, err := records.ParseCanary(raw, prefix)
	var fe *records.FieldError
	if errors.As(err, &fe) {
		return nil, invalidParam(fe.Field, fe.Msg)
	}
	return c, err
}

// Bounds of "redrive when quiet".
const (
	minQuiet = time.Minute
	maxQuiet = 7 * 24 * time.Hour
)

// defaultQuietCanary is the canary of a "redrive when quiet" request that
// names none.
var defaultQuietCanary = json.RawMessage(`{"sample": 100, "watch": "PT10M", "abort_if_refail": 0.1}`)

// quietBody is the body of POST /incidents/{id}/redrive-when-quiet.
type quietBody struct {
	// Quiet is how long no failure of the incident may arrive (ISO 8601).
	Quiet *string `json:"quiet"`
	// Canary is the retry's canary (default defaultQuietCanary).
	Canary json.RawMessage `json:"canary"`
	// RateLimit bounds the retry's records/s (0: unlimited).
	RateLimit *float64 `json:"rate_limit"`
}

// quietJSON is an incident's "redrive when quiet" request.
type quietJSON struct {
	// State is waiting (for the quiet) or started (the task).
	State       string         `json:"state"`
	Quiet       string         `json:"quiet"`
	Canary      canarySpecJSON `json:"canary"`
	RateLimit   float64        `json:"rate_limit"`
	RequestedBy string         `json:"requested_by"`
	RequestedAt jsonTime       `json:"requested_at"`
	// QuietSince is the later of the request and the arrival of the
	// incident's latest failure; QuietUntil when the retry starts if no
	// failure arrives before.
	QuietSince jsonTime  `json:"quiet_since"`
	QuietUntil jsonTime  `json:"quiet_until"`
	TaskID     *string   `json:"task_id"`
	StartedAt  *jsonTime `json:"started_at"`
}

func toQuietJSON(q *records.QuietRequest) *quietJSON {
	spec := toCanarySpecJSON(&q.Canary)
	spec.SampleSize = 0
	if records.CanaryOf(&q.Canary).Count > 0 {
		spec.SampleSize = q.Canary.SampleSize
	}
	out := &quietJSON{State: "waiting", Quiet: policy.FormatDuration(q.Quiet), Canary: spec, RateLimit: q.RateLimit,
		RequestedBy: q.RequestedBy, RequestedAt: jsonTime(q.RequestedAt), QuietSince: jsonTime(q.QuietSince),
		QuietUntil: jsonTime(q.QuietUntil()), TaskID: q.TaskID}
	if q.TaskID != nil {
		out.State = "started"
		out.StartedAt = optTime(&q.StartedAt)
	}
	return out
}

// markQuiet is POST /incidents/{id}/redrive-when-quiet: mark the incident
// resolved; once no failure of it has arrived for quiet, its canary retry
// starts by itself, as the caller.
func (s *Server) markQuiet(c echo.Context) error {
	id := c.Param("id")
	if !validIncidentID(id) {
		return invalidParam("id", "must be an incident id: lowercase hex")
	}
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	var b quietBody
	if err := bindStrict(c, &b); err != nil {
		return err
	}
	if b.Quiet == nil {
		return invalidParam("quiet", "required: an ISO 8601 duration from PT1M to P7D, such as PT15M")
	}
	quiet, err := policy.ParseDuration(*b.Quiet)
	if err != nil {
		return invalidParam("quiet", err.Error())
	}
	if quiet < minQuiet || quiet > maxQuiet {
		return invalidParam("quiet", "must be from PT1M to P7D")
	}
	raw := b.Canary
	if raw == nil || string(raw) == "null" {
		raw = defaultQuietCanary
	}
	canary, err := parseCanary(raw, "canary")
	if err != nil {
		return err
	}
	rate := 0.0
	if b.RateLimit != nil {
		rate = *b.RateLimit
		if !(rate == 0 || rate >= policy.MinRateLimit && rate <= maxRateLimit) {
			return invalidParam("rate_limit", fmt.Sprintf("must be 0 (unlimited) or a number of records per second from %v to 100000", policy.MinRateLimit))
		}
	}
	q, err := s.rec.MarkQuiet(c.Request().Context(), &records.QuietParams{Incident: id, Quiet: quiet, Canary: canary,
		RateLimit: rate, RequestedBy: keyName(c), Now: s.cfg.Now()})
	if errors.Is(err, records.ErrNotFound) {
		return notFound("incident " + id + " not found")
	}
	if err != nil {
		return err
	}
	out := toQuietJSON(q)
	noteAudit(c, id, nil, nil)
	noteChange(c, nil, out)
	return c.JSON(http.StatusOK, out)
}

// withdrawQuiet is DELETE /incidents/{id}/redrive-when-quiet: withdraw a
// request still waiting for its quiet.
func (s *Server) withdrawQuiet(c echo.Context) error {
	id := c.Param("id")
	if !validIncidentID(id) {
		return invalidParam("id", "must be an incident id: lowercase hex")
	}
	before, err := s.rec.QuietRequestOf(c.Request().Context(), id)
	if err == nil && before.TaskID == nil {
		err = s.rec.WithdrawQuiet(c.Request().Context(), id)
	} else if err == nil {
		err = records.ErrNotFound
	}
	if errors.Is(err, records.ErrNotFound) {
		return notFound("incident " + id + " has no redrive-when-quiet request waiting")
	}
	if err != nil {
		return err
	}
	noteChange(c, toQuietJSON(before), nil)
	return c.JSON(http.StatusOK, map[string]any{"withdrawn": true, "id": id})
}

// quietOf is an incident's request as the incident shows it (nil: none).
func (s *Server) quietOf(c echo.Context, id string) (*quietJSON, error) {
	q, err := s.rec.QuietRequestOf(c.Request().Context(), id)
	if errors.Is(err, records.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return toQuietJSON(q), nil
}
