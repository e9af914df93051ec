package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
)

// maxActivityQueues bounds how many queues get a series of their own.
const maxActivityQueues = 20

// activitySteps are the steps picked when none is asked for: the shortest
// that gives at most defaultActivityPoints buckets.
var activitySteps = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour}

const defaultActivityPoints = 120

// activityJSON is a series of activity: per bucket of step from since, the
// failures stored (added) and, for queues, the records redelivered
// (retried); the top queues' failures per bucket, for every queue and for
// an incident.
type activityJSON struct {
	Since  jsonTime          `json:"since"`
	Until  jsonTime          `json:"until"`
	Step   string            `json:"step"`
	Points []activityPoint   `json:"points"`
	Queues []queueSeriesJSON `json:"queues,omitempty"`
}

type activityPoint struct {
	At      jsonTime `json:"at"`
	Added   int64    `json:"added"`
	Retried *int64   `json:"retried,omitempty"`
}

type queueSeriesJSON struct {
	Name  string  `json:"name"`
	Added int64   `json:"added"`
	Data  []int64 `json:"points"`
}

// activityScope is what a series counts: every queue (neither set), one
// queue, or one incident.
type activityScope struct{ queue, incident string }

// activity is GET /activity: every queue's activity.
func (s *Server) activity(c echo.Context) error {
	return s.activityOf(c, activityScope{})
}

// queueActivity is GET /queues/{name}/activity.
func (s *Server) queueActivity(c echo.Context) error {
	name, err := queueName(c)
	if err != nil {
		return err
	}
	return s.activityOf(c, activityScope{queue: name})
}

// incidentActivity is GET /incidents/{id}/activity.
func (s *Server) incidentActivity(c echo.Context) error {
	id := c.Param("id")
	if !validIncidentID(id) {
		return invalidParam("id", "must be an incident id: lowercase hex")
	}
	globs := queueGlobs(c, auth.ActionRead)
	in, err := s.rec.GetIncident(c.Request().Context(), &records.IncidentParams{ID: id, QueueGlobs: globs})
	if errors.Is(err, records.ErrNotFound) || err == nil && globs != nil && len(in.Queues) == 0 {
		return notFound("incident " + id + " not found")
	} else if err != nil {
		return err
	}
	return s.activityOf(c, activityScope{incident: id})
}

func (s *Server) activityOf(c echo.Context, scope activityScope) error {
	q := c.QueryParams()
	known := map[string]bool{"last": true, "since": true, "until": true, "step": true, "queues": scope.queue == ""}
	if err := checkParams(q, known); err != nil {
		return err
	}
	for name := range q {
		if len(q[name]) > 1 {
			return invalidParam(name, "given more than once")
		}
	}
	p, err := activityRange(q, s.cfg.Now())
	if err != nil {
		return err
	}
	p.Queue, p.Fingerprint = scope.queue, scope.incident
	if scope.queue != "" {
		p.TopQueues = 0
	}
	p.QueueGlobs = queueGlobs(c, auth.ActionRead)
	series, err := s.rec.Activity(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := activityJSON{Since: jsonTime(p.Since), Until: jsonTime(p.Until), Step: policy.FormatDuration(p.Step),
		Points: make([]activityPoint, len(series.Added))}
	for i := range series.Added {
		out.Points[i] = activityPoint{At: jsonTime(p.Since.Add(time.Duration(i) * p.Step)), Added: series.Added[i]}
		if scope.incident == "" {
			out.Points[i].Retried = &series.Retried[i]
		}
	}
	if scope.queue == "" {
		out.Queues = make([]queueSeriesJSON, len(series.Queues))
		for i, qs := range series.Queues {
			out.Queues[i] = queueSeriesJSON{Name: qs.Queue, Added: qs.Total, Data: qs.Added}
		}
	}
	return c.JSON(http.StatusOK, out)
}

// activityRange reads the range and step of a series: since and until
// (RFC 3339; until at most now), or last (an ISO 8601 duration back from
// until, PT1H by default); step (ISO 8601, whole minutes; by default the
// shortest that gives at most 120 points). Minutes are kept two hours,
// hours seven days, so a range starting earlier than two hours ago takes
// whole hours.
func activityRange(q url.Values, now time.Time) (records.ActivityParams, error) {
	p := records.ActivityParams{Until: now, TopQueues: 5}
	var err error
	if v := q.Get("until"); v != "" {
		if p.Until, err = parseTime(v, "until"); err != nil {
			return p, err
		}
		if p.Until.After(now.Add(time.Minute)) {
			return p, invalidParam("until", "is in the future (the server's time is "+now.UTC().Format(time.RFC3339)+")")
		}
	}
	switch {
	case q.Get("since") != "" && q.Get("last") != "":
		return p, invalidParam("last", "give since or last, not both")
	case q.Get("since") != "":
		if p.Since, err = parseTime(q.Get("since"), "since"); err != nil {
			return p, err
		}
	default:
		last := time.Hour
		if v := q.Get("last"); v != "" {
			if last, err = policy.ParseDuration(v); err != nil || last <= 0 {
				return p, invalidParam("last", fmt.Sprintf("%q is not a positive ISO 8601 duration (e.g. PT1H, PT24H, P7D)", v))
			}
		}
		p.Since = p.Until.Add(-last)
	}
	if !p.Until.After(p.Since) {
		return p, invalidParam("until", "must be after since")
	}
	rangeParam := "since"
	if q.Get("since") == "" {
		rangeParam = "last"
	}
	if p.Since.Before(now.Add(-records.ActivityKept)) {
		return p, invalidParam(rangeParam, "reaches back more than 7 days (P7D): activity is kept 7 days")
	}
	hoursOnly := p.Since.Before(now.Add(-records.ActivityMinutes))
	if v := q.Get("step"); v != "" {
		if p.Step, err = policy.ParseDuration(v); err != nil || p.Step < time.Minute || p.Step%time.Minute != 0 {
			return p, invalidParam("step", fmt.Sprintf("%q is not a whole number of minutes as an ISO 8601 duration (e.g. PT1M, PT5M, PT1H)", v))
		}
		if hoursOnly && p.Step%time.Hour != 0 {
			return p, invalidParam("step", "must be a whole number of hours (PT1H, PT6H, P1D) for a range that starts more than 2 hours ago: older activity is kept by the hour")
		}
	} else {
		for _, st := range activitySteps {
			if hoursOnly && st%time.Hour != 0 {
				continue
			}
			p.Step = st
			if points(p) <= defaultActivityPoints {
				break
			}
		}
	}
	// Within the kept range, minutes only for the last two hours: a series
	// has at most 169 points (7 days by the hour).
	p.Since = p.Since.Truncate(p.Step)
	if v := q.Get("queues"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxActivityQueues {
			return p, invalidParam("queues", fmt.Sprintf("must be an integer from 0 to %d: how many queues get a series of their own", maxActivityQueues))
		}
		p.TopQueues = n
	}
	return p, nil
}

// points is how many buckets of p.Step cover p's range from p.Since
// aligned on the step.
func points(p records.ActivityParams) int {
	d := p.Until.Sub(p.Since.Truncate(p.Step))
	n := int(d / p.Step)
	if d%p.Step != 0 {
		n++
	}
	return n
}
