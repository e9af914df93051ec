package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/records"
)

// adminJobJSON is a job of GET /admin/jobs (admin spec §7.1): a summary;
// GET /admin/jobs/{id} has the whole envelope.
type adminJobJSON struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Queue string `json:"queue"`
	// State is the OJS state (docs/api.md#admin says how Redrive's map).
	State       string    `json:"state"`
	Priority    int       `json:"priority"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	Exhaustion  *string   `json:"exhaustion"`
	CreatedAt   jsonTime  `json:"created_at"`
	EnqueuedAt  *jsonTime `json:"enqueued_at"`
	// ScheduledAt is when a waiting job is due: for a redelivery, or for a
	// worker's fetch.
	ScheduledAt *jsonTime `json:"scheduled_at"`
	// StartedAt is when the job was last redelivered or fetched.
	StartedAt   *jsonTime `json:"started_at"`
	CompletedAt *jsonTime `json:"completed_at"`
	DiscardedAt *jsonTime `json:"discarded_at"`
}

func toAdminJobJSON(j *records.JobRow) adminJobJSON {
	return adminJobJSON{ID: j.ID, Type: j.Type, Queue: j.Queue, State: j.State, Priority: int(j.Priority), Attempt: j.Attempt,
		MaxAttempts: j.MaxAttempts, Exhaustion: j.Exhaustion, CreatedAt: jsonTime(j.CreatedAt), EnqueuedAt: optTime(j.EnqueuedAt),
		ScheduledAt: optTime(j.DueAt), StartedAt: optTime(j.StartedAt), CompletedAt: optTime(j.CompletedAt), DiscardedAt: optTime(j.DiscardedAt)}
}

// adminJobParams are the query parameters of GET /admin/jobs (admin spec §7.1).
var adminJobParams = map[string]bool{"queue": true, "state": true, "type": true, "since": true, "until": true,
	"page": true, "per_page": true, "sort": true, "order": true}

// adminJobs pages through the jobs of the queues the caller reads, newest
// first (admin spec §7.1), filtered by queue, OJS state, type (exact, or a
// prefix ending in *) and creation time.
func (s *Server) adminJobs(c echo.Context) error {
	qp := c.QueryParams()
	if err := checkParams(qp, adminJobParams); err != nil {
		return err
	}
	for name := range qp {
		if len(qp[name]) > 1 {
			return invalidParam(name, "given more than once")
		}
	}
	page, perPage, err := parsePage(c)
	if err != nil {
		return err
	}
	if v := qp.Get("sort"); v != "" && v != "created_at" {
		return invalidParam("sort", "must be created_at: the jobs are listed in the order they were created (scheduled_at and priority orders are not offered)")
	}
	asc := false
	switch qp.Get("order") {
	case "", "desc":
	case "asc":
		asc = true
	default:
		return invalidParam("order", "must be asc or desc")
	}
	state := qp.Get("state")
	if state != "" && !slices.Contains(records.JobStates, state) {
		return invalidParam("state", "must be one of "+strings.Join(records.JobStates, ", "))
	}
	typ, prefix := qp.Get("type"), ""
	if p, ok := strings.CutSuffix(typ, "*"); ok {
		typ, prefix = "", p
	}
	if strings.Contains(prefix, "*") {
		return invalidParam("type", "a type matches exactly, or as a prefix with one * at its end (\"email.*\")")
	}
	// The record filter bounds and reads queue, type, since and until.
	f, err := filter.ParseQuery(url.Values{"queue": {qp.Get("queue")}, "type": {typ}, "since": {qp.Get("since")},
		"until": {qp.Get("until")}}, filter.List)
	if err != nil {
		return err
	}
	p := &records.JobListParams{Filter: f, State: state, TypePrefix: prefix, Asc: asc, Offset: (page - 1) * perPage,
		Limit: perPage, Now: s.cfg.Now(), Scope: filter.Scope{QueueGlobs: queueGlobs(c, auth.ActionRead)}}
	res, err := s.rec.ListJobs(c.Request().Context(), p)
	if err != nil {
		return err
	}
	items := make([]adminJobJSON, len(res.Jobs))
	for i := range res.Jobs {
		items[i] = toAdminJobJSON(&res.Jobs[i])
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "pagination": adminPaginationJSON{Total: res.Total,
		TotalCapped: res.TotalCapped, TotalEstimated: res.TotalEstimated, Page: page, PerPage: perPage, HasMore: res.HasMore}})
}

// adminJob answers a job's whole envelope (admin spec §7.2): the job as GET
// /ojs/v1/jobs/{id} shows it, at the top level. A job of a queue the caller
// does not read is not found, as one that does not exist.
func (s *Server) adminJob(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	id, err := recordID(c)
	if err != nil {
		return err
	}
	j, err := s.rec.Job(c.Request().Context(), id, s.cfg.Now())
	if errors.Is(err, records.ErrNotFound) || err == nil && !readable(c, j.Record.Queue) {
		return notFound("no job with id " + id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toJobJSON(s.maskedJob(c, j)))
}

// adminBulkBody is POST /admin/jobs/bulk/retry (admin spec §8.1).
type adminBulkBody struct {
	// Filter selects the jobs: state (discarded, cancelled or retryable)
	// is required; queue, type, since, until and the record filter's other
	// keys narrow.
	Filter json.RawMessage `json:"filter"`
	// Confirm must be true (admin spec §4, "Safe by default").
	Confirm *bool `json:"confirm"`
}

// adminRetryStates map the OJS states a bulk retry takes onto the record
// filter's state and exhaustion.
var adminRetryStates = map[string][2]string{
	"discarded": {string(dlq.StateDiscarded), ""},
	"cancelled": {string(dlq.StateDiscarded), string(dlq.ExhaustionCancelled)},
	"retryable": {string(dlq.StateRetryable), ""},
}

// adminBulkRetry retries the jobs a filter selects, as POST
// /dead-letter/retry with "confirm": true does: a task carries it out, and
// the answer (202) is the number matched and the task, which GET
// /ojs/v1/tasks/{id} follows to the retried and failed counts.
func (s *Server) adminBulkRetry(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	var b adminBulkBody
	if err := bindStrict(c, &b); err != nil {
		return err
	}
	if b.Confirm == nil || !*b.Confirm {
		return invalidParam("confirm", "must be true: a bulk retry runs only when confirmed (OJS admin API §4, safe by default); "+
			"POST /ojs/v1/dead-letter/retry without confirm counts what it would retry")
	}
	m := map[string]any{}
	if len(bytes.TrimSpace(b.Filter)) > 0 && string(bytes.TrimSpace(b.Filter)) != "null" {
		dec := json.NewDecoder(bytes.NewReader(b.Filter))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil || m == nil {
			return invalidParam("filter", "must be a JSON object")
		}
	}
	st, _ := m["state"].(string)
	to, ok := adminRetryStates[st]
	if !ok {
		return invalidParam("filter.state", "required: the state of the jobs to retry, one of cancelled, discarded, retryable")
	}
	if _, set := m["exhaustion"]; set && st != "discarded" {
		return invalidParam("filter.exhaustion", "narrows state discarded only")
	}
	m["state"] = to[0]
	if to[1] != "" {
		m["exhaustion"] = to[1]
	}
	f, err := filter.ParseMap(m, filter.Bulk, "filter")
	if err != nil {
		return err
	}
	if err := s.checkBulkMasking(c, &f, false); err != nil {
		return err
	}
	res, err := s.rec.Bulk(c.Request().Context(), &records.BulkParams{Kind: records.TaskRetry, Filter: f, Confirm: true,
		CreatedBy: keyName(c), QueueGlobs: queueGlobs(c, auth.ActionRetry)})
	if err != nil {
		return err
	}
	canon, n, t := f.Canonical(), res.N, res.Task
	noteAudit(c, "task:"+t.ID, canon, &n)
	c.Response().Header().Set(echo.HeaderLocation, BasePath+"/tasks/"+t.ID)
	return c.JSON(http.StatusAccepted, map[string]any{"action": "retry", "matched": n, "skipped": res.Skipped,
		"filter": canon, "task": toTaskJSON(t)})
}
