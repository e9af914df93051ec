package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/records"
)

// The worker lifecycle (docs/api.md#worker-lifecycle): the heartbeat (OJS
// worker protocol §4, HTTP binding §10.4) and the admin API's worker
// management (admin spec §9). A worker appears in the registry on its first
// heartbeat; an operator quiets or terminates it through the admin routes,
// and its next heartbeat answers the directive. The heartbeat is the data
// plane, as fetch is: write scope, not audited. The admin routes' writes are
// audited.

// Bounds of what a heartbeat reports about its worker.
const (
	maxWorkerHostBytes   = 255
	maxWorkerLabels      = 50
	maxWorkerLabelBytes  = 255
	maxWorkerJobIDBytes  = 255
	maxWorkerConcurrency = 1_000_000
	maxWorkerActiveJobs  = 1_000_000
	maxWorkerPID         = 1<<32 - 1
	defaultWorkersPage   = 20
	maxWorkersPage       = 100
	maxWorkersPageNumber = 1_000_000
)

// workerLifecycleRoutes are the routes of the worker lifecycle (OJS worker
// protocol): the heartbeat, and the admin API's worker management (admin
// spec §9) under BasePath+AdminPath.
//
// Workers are not of one queue: a caller that may read every queue sees them
// all; one limited to some queues sees the workers whose queues (as their
// heartbeats report them, else those of their latest fetch) all are among
// the queues it may read, and no worker that names none; of those, only the
// leases on queues it may read. Quieting, terminating and deregistering a
// worker need configure on each of its queues (and, to deregister, on the
// queues of the jobs it holds).
func (s *Server) workerLifecycleRoutes() []route {
	return []route{
		{method: http.MethodPost, path: "/workers/heartbeat", handler: s.workerHeartbeat},
		{method: http.MethodGet, path: AdminPath + "/workers", handler: s.listWorkers, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: AdminPath + "/workers/:id", handler: s.getWorker, perm: needSome(auth.ActionRead)},
		{method: http.MethodPost, path: AdminPath + "/workers/:id/quiet", handler: s.directWorker(records.WorkerQuiet),
			action: "worker.quiet", perm: needSome(auth.ActionConfigure)},
		{method: http.MethodPost, path: AdminPath + "/workers/:id/terminate", handler: s.directWorker(records.WorkerTerminate),
			action: "worker.terminate", perm: needSome(auth.ActionConfigure)},
		{method: http.MethodDelete, path: AdminPath + "/workers/:id", handler: s.deregisterWorker,
			action: "worker.deregister", perm: needSome(auth.ActionConfigure)},
	}
}

func init() {
	// The worker routes' audit entries hold no record data: a directive
	// before and after, the released jobs' count.
	for _, a := range []string{"worker.quiet", "worker.terminate", "worker.deregister"} {
		auditShapes[a] = auditShape{before: docPlain, after: docPlain}
	}
}

// heartbeatBody is POST /workers/heartbeat: HTTP binding §10.4's shape
// (active_jobs the ids, visibility_timeout_ms) and worker protocol §4.2's
// (active_jobs a count, active_job_ids, and what the worker says of itself).
type heartbeatBody struct {
	WorkerID            *string         `json:"worker_id"`
	State               *string         `json:"state"`
	ActiveJobs          json.RawMessage `json:"active_jobs"`
	ActiveJobIDs        json.RawMessage `json:"active_job_ids"`
	VisibilityTimeoutMs *int64          `json:"visibility_timeout_ms"`
	Hostname            *string         `json:"hostname"`
	PID                 *int64          `json:"pid"`
	Queues              []string        `json:"queues"`
	Concurrency         *int64          `json:"concurrency"`
	Labels              []string        `json:"labels"`
	StartedAt           *string         `json:"started_at"`
}

// heartbeatJSON is the heartbeat's answer (HTTP binding §10.4).
type heartbeatJSON struct {
	State        records.WorkerState `json:"state"`
	JobsExtended []string            `json:"jobs_extended"`
	ServerTime   jsonTime            `json:"server_time"`
}

func (s *Server) workerHeartbeat(c echo.Context) error {
	ojsMedia(c)
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	var b heartbeatBody
	if err := bindStrict(c, &b); err != nil {
		return err
	}
	now := s.cfg.Now()
	h, err := s.heartbeatOf(&b, now)
	if err != nil {
		return err
	}
	res, err := s.rec.WorkerHeartbeat(c.Request().Context(), h)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, heartbeatJSON{State: res.State, JobsExtended: res.Extended, ServerTime: jsonTime(now)})
}

// heartbeatOf checks a heartbeat's every field and makes it a
// records.Heartbeat at now.
func (s *Server) heartbeatOf(b *heartbeatBody, now time.Time) (*records.Heartbeat, error) {
	if b.WorkerID == nil || *b.WorkerID == "" {
		return nil, invalidParam("worker_id", "required: the id the worker names itself with, as in its fetches")
	}
	id, err := workerIDOf(b.WorkerID)
	if err != nil {
		return nil, err
	}
	h := &records.Heartbeat{WorkerID: id, Now: now}
	if b.State != nil {
		st := records.WorkerState(*b.State)
		if !st.Valid() {
			return nil, invalidParam("state", "must be running, quiet or terminate (OJS worker protocol §2.1), got "+jsonString(*b.State))
		}
		h.State = &st
	}
	var ids []string
	count := -1
	switch t := bytes.TrimSpace(b.ActiveJobs); {
	case isNull(t):
	case t[0] == '[':
		if ids, err = workerJobIDs(t, "active_jobs"); err != nil {
			return nil, err
		}
	default:
		var n int64
		if json.Unmarshal(t, &n) != nil || n < 0 || n > maxWorkerActiveJobs {
			return nil, invalidParam("active_jobs", fmt.Sprintf("must be the ids of the jobs in progress (HTTP binding §10.4) or their number from 0 to %d (worker protocol §4.2), got %s",
				maxWorkerActiveJobs, clipWorkerText(string(t), 64)))
		}
		count = int(n)
	}
	if t := bytes.TrimSpace(b.ActiveJobIDs); !isNull(t) {
		more, err := workerJobIDs(t, "active_job_ids")
		if err != nil {
			return nil, err
		}
		for _, id := range more {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		if len(ids) > records.MaxWorkerJobIDs {
			return nil, invalidParam("active_job_ids", fmt.Sprintf("at most %d job ids in active_jobs and active_job_ids together", records.MaxWorkerJobIDs))
		}
	}
	h.ActiveJobIDs, h.ActiveJobs = ids, len(ids)
	if count >= 0 {
		h.ActiveJobs = count
	}
	for _, id := range ids {
		// Ids that are no UUID are no job of this server (the worker
		// protocol's examples name jobs "job_1"): kept as reported, never
		// extended.
		if _, err := uuid.Parse(id); err == nil && len(id) == 36 {
			h.Extend = append(h.Extend, id)
		}
	}
	if v := b.VisibilityTimeoutMs; v != nil {
		if *v < 1 || *v > maxVisibilitySecs*1000 {
			return nil, invalidParam("visibility_timeout_ms", fmt.Sprintf("must be a number of milliseconds from 1 to %d, got %d", maxVisibilitySecs*1000, *v))
		}
		d := time.Duration(*v) * time.Millisecond
		h.ExtendBy = &d
	}
	if b.Hostname != nil {
		if *b.Hostname == "" || len(*b.Hostname) > maxWorkerHostBytes {
			return nil, invalidParam("hostname", fmt.Sprintf("must be 1 to %d bytes", maxWorkerHostBytes))
		}
		if msg := nameProblem(*b.Hostname); msg != "" {
			return nil, invalidParam("hostname", msg)
		}
		h.Hostname = b.Hostname
	}
	if b.PID != nil {
		if *b.PID < 1 || *b.PID > maxWorkerPID {
			return nil, invalidParam("pid", fmt.Sprintf("must be a process id from 1 to %d, got %d", int64(maxWorkerPID), *b.PID))
		}
		h.PID = b.PID
	}
	if b.Queues != nil {
		if len(b.Queues) > maxFetchQueues {
			return nil, invalidParam("queues", fmt.Sprintf("at most %d queues", maxFetchQueues))
		}
		h.Queues = []string{}
		for i, q := range b.Queues {
			if err := s.checkJobQueue(q, "queues["+itoa(i)+"]"); err != nil {
				return nil, err
			}
			if !slices.Contains(h.Queues, q) {
				h.Queues = append(h.Queues, q)
			}
		}
	}
	if b.Concurrency != nil {
		if *b.Concurrency < 1 || *b.Concurrency > maxWorkerConcurrency {
			return nil, invalidParam("concurrency", fmt.Sprintf("must be from 1 to %d, got %d", maxWorkerConcurrency, *b.Concurrency))
		}
		n := int32(*b.Concurrency)
		h.Concurrency = &n
	}
	if b.Labels != nil {
		if len(b.Labels) > maxWorkerLabels {
			return nil, invalidParam("labels", fmt.Sprintf("at most %d labels", maxWorkerLabels))
		}
		h.Labels = []string{}
		for i, l := range b.Labels {
			field := "labels[" + itoa(i) + "]"
			if l == "" || len(l) > maxWorkerLabelBytes {
				return nil, invalidParam(field, fmt.Sprintf("must be 1 to %d bytes", maxWorkerLabelBytes))
			}
			if msg := nameProblem(l); msg != "" {
				return nil, invalidParam(field, msg)
			}
			h.Labels = append(h.Labels, l)
		}
	}
	if b.StartedAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *b.StartedAt)
		if err != nil || t.Year() < 1970 || t.Year() > 9999 {
			return nil, invalidParam("started_at", "must be an RFC 3339 time, such as \"2026-02-12T10:30:00Z\", got "+jsonString(clipWorkerText(*b.StartedAt, 64)))
		}
		h.StartedAt = &t
	}
	return h, nil
}

// workerJobIDs reads a heartbeat's list of job ids (field names it): at most
// records.MaxWorkerJobIDs strings of 1 to 255 bytes without control
// characters, duplicates dropped; a UUID in its canonical form.
func workerJobIDs(raw json.RawMessage, field string) ([]string, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalidParam(field, "must be an array of job ids")
	}
	if len(items) > records.MaxWorkerJobIDs {
		return nil, invalidParam(field, fmt.Sprintf("at most %d job ids", records.MaxWorkerJobIDs))
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		f := field + "[" + itoa(i) + "]"
		var id string
		if err := json.Unmarshal(it, &id); err != nil {
			return nil, invalidParam(f, "must be a job id (a string)")
		}
		if id == "" || len(id) > maxWorkerJobIDBytes {
			return nil, invalidParam(f, fmt.Sprintf("must be 1 to %d bytes", maxWorkerJobIDBytes))
		}
		if msg := nameProblem(id); msg != "" {
			return nil, invalidParam(f, msg)
		}
		if u, err := uuid.Parse(id); err == nil {
			id = u.String()
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// clipWorkerText cuts s to at most n bytes for an error message.
func clipWorkerText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// workerJSON is a worker as the admin API shows it (admin spec §9.1).
type workerJSON struct {
	ID       string  `json:"id"`
	Hostname *string `json:"hostname"`
	PID      *int64  `json:"pid"`
	// State is running, quiet or terminate (the further of the directive
	// and what the worker reports), or stale.
	State         records.WorkerState  `json:"state"`
	Directive     records.WorkerState  `json:"directive"`
	DirectiveAt   *jsonTime            `json:"directive_at"`
	DirectiveBy   *string              `json:"directive_by"`
	ReportedState *records.WorkerState `json:"reported_state"`
	Queues        []string             `json:"queues"`
	Concurrency   *int32               `json:"concurrency"`
	Labels        []string             `json:"labels"`
	// ActiveJobs is how many jobs it holds a lease on (of the queues the
	// caller may read); ReportedActiveJobs what its latest heartbeat said.
	ActiveJobs         int64     `json:"active_jobs"`
	ReportedActiveJobs *int32    `json:"reported_active_jobs"`
	StartedAt          *jsonTime `json:"started_at"`
	FirstSeenAt        jsonTime  `json:"first_seen_at"`
	LastSeenAt         jsonTime  `json:"last_seen_at"`
	LastHeartbeatAt    *jsonTime `json:"last_heartbeat_at"`
	Heartbeats         int64     `json:"heartbeats"`
}

func toWorkerJSON(w *records.Worker) workerJSON {
	return workerJSON{ID: w.ID, Hostname: w.Hostname, PID: w.PID, State: w.State, Directive: w.Directive,
		DirectiveAt: optTime(w.DirectiveAt), DirectiveBy: w.DirectiveBy, ReportedState: w.ReportedState,
		Queues: w.Queues, Concurrency: w.Concurrency, Labels: w.Labels, ActiveJobs: w.Leases, ReportedActiveJobs: w.ActiveJobs,
		StartedAt: optTime(w.StartedAt), FirstSeenAt: jsonTime(w.FirstSeenAt), LastSeenAt: jsonTime(w.LastSeenAt),
		LastHeartbeatAt: optTime(w.LastHeartbeatAt), Heartbeats: w.Heartbeats}
}

// workerDetailJSON is one worker with its jobs (admin spec §9.2).
type workerDetailJSON struct {
	workerJSON
	// ActiveJobIDs are the jobs it holds a lease on, soonest expiry first;
	// Leases the same with their queue and expiry.
	ActiveJobIDs []string          `json:"active_job_ids"`
	Leases       []workerLeaseJSON `json:"leases"`
	// ReportedActiveJobIDs are the ids its latest heartbeat reported.
	ReportedActiveJobIDs []string `json:"reported_active_job_ids"`
}

type workerLeaseJSON struct {
	JobID     string   `json:"job_id"`
	Queue     string   `json:"queue"`
	ExpiresAt jsonTime `json:"expires_at"`
}

// workerSummaryJSON counts the workers the caller may see by state.
type workerSummaryJSON struct {
	Total     int64 `json:"total"`
	Running   int64 `json:"running"`
	Quiet     int64 `json:"quiet"`
	Terminate int64 `json:"terminate"`
	Stale     int64 `json:"stale"`
}

// workerPaginationJSON is admin spec §7.1's pagination.
type workerPaginationJSON struct {
	Total   int64 `json:"total"`
	Page    int   `json:"page"`
	PerPage int   `json:"per_page"`
}

func (s *Server) listWorkers(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, map[string]bool{"page": true, "per_page": true, "state": true, "queue": true}); err != nil {
		return err
	}
	p := &records.WorkerListParams{QueueGlobs: queueGlobs(c, auth.ActionRead), Page: 1, PerPage: defaultWorkersPage, Now: s.cfg.Now()}
	var err error
	if p.Page, err = workersPageParam(q, "page", 1, maxWorkersPageNumber, 1); err != nil {
		return err
	}
	if p.PerPage, err = workersPageParam(q, "per_page", 1, maxWorkersPage, defaultWorkersPage); err != nil {
		return err
	}
	if v := q.Get("state"); v != "" {
		st := records.WorkerState(v)
		if !st.Valid() && st != records.WorkerStale {
			return invalidParam("state", "must be running, quiet, terminate or stale, got "+jsonString(clipWorkerText(v, 64)))
		}
		p.State = st
	}
	if v := q.Get("queue"); v != "" {
		if msg := dlq.TopicNameProblem(v); msg != "" {
			return invalidParam("queue", msg)
		}
		p.Queue = v
	}
	page, err := s.rec.ListWorkers(c.Request().Context(), p)
	if err != nil {
		return err
	}
	items := make([]workerJSON, len(page.Items))
	for i := range page.Items {
		items[i] = toWorkerJSON(&page.Items[i])
	}
	sum := page.Summary
	return c.JSON(http.StatusOK, map[string]any{"items": items,
		"summary":    workerSummaryJSON{Total: sum.Total, Running: sum.Running, Quiet: sum.Quiet, Terminate: sum.Terminate, Stale: sum.Stale},
		"pagination": workerPaginationJSON{Total: page.Total, Page: p.Page, PerPage: p.PerPage}})
}

// workersPageParam reads an integer query parameter from lo to hi (def
// when absent).
func workersPageParam(q url.Values, name string, lo, hi, def int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalidParam(name, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
	}
	return n, nil
}

// workerParam reads the :id of a worker route.
func workerParam(c echo.Context) (string, error) {
	id := c.Param("id")
	// echo routes on the escaped path when the request's differs from
	// the default encoding (an id holding '/' sent as %2F): its params are
	// escaped then, and only then.
	if c.Request().URL.RawPath != "" {
		u, err := url.PathUnescape(id)
		if err != nil {
			return "", invalidParam("id", "must be a percent-encoded worker id")
		}
		id = u
	}
	if id == "" || len(id) > maxWorkerIDBytes {
		return "", invalidParam("id", fmt.Sprintf("must be a worker id of 1 to %d bytes", maxWorkerIDBytes))
	}
	if msg := nameProblem(id); msg != "" {
		return "", invalidParam("id", msg)
	}
	return id, nil
}

// workerVisible reports whether the caller may see worker w: it may read
// every queue, or w names queues and it may read each of them.
func workerVisible(c echo.Context, w *records.Worker) bool {
	return workerAllowed(principal(c), auth.ActionRead, w.Queues)
}

// workerAllowed reports whether p may do a on every one of queues, and on
// every queue when queues is empty.
func workerAllowed(p auth.Principal, a auth.Action, queues []string) bool {
	if p.AllQueues(a) {
		return true
	}
	if len(queues) == 0 {
		return false
	}
	for _, q := range queues {
		if !p.Allowed(a, q) {
			return false
		}
	}
	return true
}

// loadWorker reads worker id at now for the caller: 404 when there is none,
// or none it may see (so that workers of other teams' queues do not show).
func (s *Server) loadWorker(c echo.Context, id string, now time.Time) (*records.Worker, error) {
	w, err := s.rec.GetWorker(c.Request().Context(), id, now)
	if errors.Is(err, records.ErrWorkerNotFound) || err == nil && !workerVisible(c, w) {
		return nil, notFound("no worker " + jsonString(id) + " that you may see")
	}
	return w, err
}

func (s *Server) getWorker(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	id, err := workerParam(c)
	if err != nil {
		return err
	}
	d, err := s.workerDetail(c, id, s.cfg.Now())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// workerDetail is worker id at now as the caller may see it: its leases on
// the queues it may read, and the reported job ids that are no job of a
// queue it may not read.
func (s *Server) workerDetail(c echo.Context, id string, now time.Time) (*workerDetailJSON, error) {
	w, err := s.loadWorker(c, id, now)
	if err != nil {
		return nil, err
	}
	ctx := c.Request().Context()
	leases, err := s.rec.WorkerLeases(ctx, id, now)
	if err != nil {
		return nil, err
	}
	out := &workerDetailJSON{workerJSON: toWorkerJSON(w), ActiveJobIDs: []string{}, Leases: []workerLeaseJSON{},
		ReportedActiveJobIDs: []string{}}
	for _, l := range leases {
		if readable(c, l.Queue) {
			out.ActiveJobIDs = append(out.ActiveJobIDs, l.JobID)
			out.Leases = append(out.Leases, workerLeaseJSON{JobID: l.JobID, Queue: l.Queue, ExpiresAt: jsonTime(l.Until)})
		}
	}
	all := principal(c).AllQueues(auth.ActionRead)
	if !all {
		out.ActiveJobs = int64(len(out.Leases)) // of the queues it may read
	}
	reported := w.ActiveJobIDs
	if !all && len(reported) > 0 {
		var uuids []string
		for _, r := range reported {
			if _, err := uuid.Parse(r); err == nil && len(r) == 36 {
				uuids = append(uuids, r)
			}
		}
		queues, err := s.rec.JobQueues(ctx, uuids)
		if err != nil {
			return nil, err
		}
		reported = slices.DeleteFunc(slices.Clone(reported), func(id string) bool {
			q, ok := queues[id]
			return ok && !readable(c, q)
		})
	}
	out.ReportedActiveJobIDs = append(out.ReportedActiveJobIDs, reported...)
	return out, nil
}

// directWorker tells a worker to quiet or terminate (admin spec §9.3): its
// next heartbeat answers the directive. A directive only moves forward:
// quieting a worker told to terminate is a 409.
func (s *Server) directWorker(d records.WorkerState) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, w, now, err := s.workerToChange(c)
		if err != nil {
			return err
		}
		err = s.rec.SetWorkerDirective(c.Request().Context(), id, d, displayName(principal(c)), now)
		switch {
		case errors.Is(err, records.ErrWorkerNotFound):
			return notFound("no worker " + jsonString(id) + " that you may see")
		case errors.Is(err, records.ErrWorkerDirectiveBackward):
			return &APIError{Status: http.StatusConflict, Code: CodeConflict,
				Message: "worker " + jsonString(id) + " was told to terminate: a worker does not go back from terminate to quiet (OJS worker protocol §2.3)",
				Details: map[string]any{"worker_id": id, "directive": string(records.WorkerTerminate)}}
		case err != nil:
			return err
		}
		noteChange(c, map[string]any{"directive": w.Directive}, map[string]any{"directive": d})
		out, err := s.workerDetail(c, id, now)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
}

// mayWorker checks the caller may do a to worker w: a on each of its queues
// (on every queue when it names none).
func mayWorker(c echo.Context, w *records.Worker, a auth.Action) error {
	p := principal(c)
	if workerAllowed(p, a, w.Queues) {
		return nil
	}
	for _, q := range w.Queues {
		if !p.Allowed(a, q) {
			return forbidden(p, a, q, "a worker is directed by whoever may "+string(a)+" each of its queues")
		}
	}
	return forbidden(p, a, "", "the worker names no queue: it is directed by whoever may "+string(a)+" every queue")
}

// deregisterWorker removes a stale worker (admin spec §9.4: "Only workers
// that have missed their heartbeat deadline can be deregistered") and
// releases its leases: each counts as an expired lease (a failed attempt,
// error type visibility_timeout, that the retry policy judges), as if the
// worker had let it expire.
func (s *Server) deregisterWorker(c echo.Context) error {
	id, w, now, err := s.workerToChange(c)
	if err != nil {
		return err
	}
	p := principal(c)
	released, err := s.rec.DeregisterWorker(c.Request().Context(), id, now, func(queues []string) error {
		for _, q := range queues {
			if !p.Allowed(auth.ActionConfigure, q) {
				// The queue is not named: the caller may not read it.
				return forbidden(p, auth.ActionConfigure, "", "the worker holds jobs of queues you may not configure")
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, records.ErrWorkerNotFound):
		return notFound("no worker " + jsonString(id) + " that you may see")
	case errors.Is(err, records.ErrWorkerNotStale):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict,
			Message: fmt.Sprintf("worker %s was seen at %s, within the heartbeat timeout of %s: only a stale worker is deregistered (admin API §9.4); quiet or terminate it instead",
				jsonString(id), w.LastSeenAt.UTC().Format(timeLayout), records.WorkerHeartbeatTimeout),
			Details: map[string]any{"worker_id": id, "last_seen_at": jsonTime(w.LastSeenAt)}}
	case err != nil:
		return err
	}
	noteAudit(c, id, nil, count64(len(released)))
	noteChange(c, map[string]any{"directive": w.Directive, "state": w.State}, map[string]any{"deregistered": true, "released_jobs": len(released)})
	return c.JSON(http.StatusOK, map[string]any{"id": id, "deregistered": true, "released_job_ids": released})
}

// workerToChange reads what every write about one worker starts with: no
// query parameters, no body, a worker the caller may see and configure on
// each of its queues; with the time of the call.
func (s *Server) workerToChange(c echo.Context) (string, *records.Worker, time.Time, error) {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return "", nil, time.Time{}, err
	}
	if _, err := readBody(c, true); err != nil {
		return "", nil, time.Time{}, err
	}
	id, err := workerParam(c)
	if err != nil {
		return "", nil, time.Time{}, err
	}
	now := s.cfg.Now()
	w, err := s.loadWorker(c, id, now)
	if err != nil {
		return "", nil, time.Time{}, err
	}
	if err := mayWorker(c, w, auth.ActionConfigure); err != nil {
		return "", nil, time.Time{}, err
	}
	return id, w, now, nil
}
