package httpapi

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/records"
)

// incidentJSON is an incident as the API shows it.
type incidentJSON struct {
	ID        string           `json:"id"`
	ErrorType string           `json:"error_type"`
	Signature string           `json:"signature"`
	Count     int64            `json:"count"`
	Queues    []string         `json:"queues"`
	States    map[string]int64 `json:"states"`
	FirstSeen jsonTime         `json:"first_seen"`
	LastSeen  jsonTime         `json:"last_seen"`
	Sample    incidentSample   `json:"sample"`
	// Frames are the top backtrace frames the fingerprint reads (no line
	// numbers): incidents of one message from different code differ there.
	Frames []string `json:"frames"`
}

type incidentSample struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

func toIncidentJSON(in *records.Incident) incidentJSON {
	states := in.States
	if states == nil {
		states = map[string]int64{}
	}
	queues := in.Queues
	if queues == nil {
		queues = []string{}
	}
	frames := in.Frames
	if frames == nil {
		frames = []string{}
	}
	return incidentJSON{ID: in.ID, ErrorType: in.ErrorType, Signature: in.Signature, Count: in.Count, Queues: queues,
		States: states, FirstSeen: jsonTime(in.FirstSeen), LastSeen: jsonTime(in.LastSeen),
		Sample: incidentSample{ID: in.SampleID, Message: in.SampleMessage}, Frames: frames}
}

// restrictedSample replaces an incident's sample for a caller limited to
// some queues: the sample record may be of a queue they may not read.
var restrictedSample = incidentSample{}

var incidentParams = map[string]bool{"queue": true, "state": true, "since": true, "sort": true, "limit": true}

// listIncidents is GET /incidents: the fingerprints with live records.
func (s *Server) listIncidents(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, incidentParams); err != nil {
		return err
	}
	for name := range q {
		if len(q[name]) > 1 {
			return invalidParam(name, "given more than once")
		}
	}
	p := &records.IncidentParams{Queue: q.Get("queue"), State: q.Get("state"), Sort: q.Get("sort")}
	if p.State != "" && !dlq.State(p.State).Valid() {
		return invalidParam("state", "must be one of retryable, available, completed, discarded")
	}
	switch p.Sort {
	case "":
		p.Sort = records.IncidentSortCount
	case records.IncidentSortCount, records.IncidentSortLastSeen:
	default:
		return invalidParam("sort", "must be count or last_seen")
	}
	var err error
	if p.Since, err = parseTime(q.Get("since"), "since"); err != nil {
		return err
	}
	if p.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return err
	}
	p.QueueGlobs = queueGlobs(c, auth.ActionRead)
	list, err := s.rec.ListIncidents(c.Request().Context(), p)
	if err != nil {
		return err
	}
	items := make([]incidentJSON, len(list))
	m := s.maskerOf(c)
	for i := range list {
		items[i] = m.incident(toIncidentJSON(&list[i]))
		if p.QueueGlobs != nil {
			items[i].Sample = restrictedSample
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// getIncident is GET /incidents/{id}.
func (s *Server) getIncident(c echo.Context) error {
	id := c.Param("id")
	if !validIncidentID(id) {
		return invalidParam("id", "must be an incident id: lowercase hex")
	}
	globs := queueGlobs(c, auth.ActionRead)
	in, err := s.rec.GetIncident(c.Request().Context(), &records.IncidentParams{ID: id, QueueGlobs: globs})
	if errors.Is(err, records.ErrNotFound) || err == nil && globs != nil && len(in.Queues) == 0 {
		// An incident with no record the caller may read is not theirs to see.
		return notFound("incident " + id + " not found")
	}
	if err != nil {
		return err
	}
	quiet, err := s.quietOf(c, id)
	if err != nil {
		return err
	}
	out := incidentDetailJSON{incidentJSON: s.maskerOf(c).incident(toIncidentJSON(in)), RedriveWhenQuiet: quiet}
	if globs != nil {
		out.Sample = restrictedSample
	}
	return c.JSON(http.StatusOK, out)
}

// incidentDetailJSON is one incident with its "redrive when quiet" request
// (null: none).
type incidentDetailJSON struct {
	incidentJSON
	RedriveWhenQuiet *quietJSON `json:"redrive_when_quiet"`
}

// validIncidentID reports whether id looks like a fingerprint (lowercase
// hex), so that anything else is refused before it reaches a query.
func validIncidentID(id string) bool { return filter.ValidIncident(id) }
