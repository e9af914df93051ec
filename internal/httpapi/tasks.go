package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/records"
)

// taskJSON is a background bulk task. Its counts add up: processed +
// skipped.count + remaining = total (store.Task): remaining is what it has
// not got to (still to do while it runs, left as it was once it was
// cancelled, aborted or failed), progress the share of total dealt with
// (processed or skipped).
type taskJSON struct {
	ID              string            `json:"id"`
	Kind            string            `json:"kind"`
	State           string            `json:"state"`
	Filter          json.RawMessage   `json:"filter"`
	RateLimit       float64           `json:"rate_limit"`
	Total           int64             `json:"total"`
	Processed       int64             `json:"processed"`
	Remaining       int64             `json:"remaining"`
	Progress        float64           `json:"progress"`
	Errors          []taskErrorJSON   `json:"errors"`
	CancelRequested bool              `json:"cancel_requested"`
	CreatedBy       string            `json:"created_by"`
	Owner           *string           `json:"owner"`
	CreatedAt       jsonTime          `json:"created_at"`
	StartedAt       *jsonTime         `json:"started_at"`
	UpdatedAt       jsonTime          `json:"updated_at"`
	FinishedAt      *jsonTime         `json:"finished_at"`
	Links           map[string]string `json:"links"`
	// Patch is a retry's JSON Patch; null for none.
	Patch json.RawMessage `json:"patch"`
	// Target is a retry's redelivery target (group or topic); null keeps
	// each record's policy.
	Target *string `json:"target"`
	// Skipped are the records the task left as they were, by reason.
	Skipped skippedJSON `json:"skipped"`
	// Canary is a retry's canary and where it stands; null for none.
	Canary *canaryJSON `json:"canary"`
	// TargetQueue is a queue_move's target queue; null for other kinds.
	TargetQueue *string `json:"target_queue"`
}

// canarySpecJSON is a canary as asked, its sample sized.
type canarySpecJSON struct {
	Sample        json.RawMessage `json:"sample"`
	SampleSize    int64           `json:"sample_size"`
	Watch         string          `json:"watch"`
	AbortIfRefail float64         `json:"abort_if_refail"`
	// OnInconclusive is stop or continue.
	OnInconclusive string `json:"on_inconclusive"`
}

func toCanarySpecJSON(c *records.CanarySpec) canarySpecJSON {
	on := c.OnInconclusive
	if on == "" {
		on = records.CanaryStop
	}
	return canarySpecJSON{Sample: c.Sample, SampleSize: c.SampleSize, Watch: c.Watch, AbortIfRefail: c.AbortIfRefail, OnInconclusive: on}
}

// canaryJSON is a task's canary: what was asked, its phase, the verdict
// once given, and the sample's outcomes as last counted.
type canaryJSON struct {
	canarySpecJSON
	// Phase is sample, watch, passed or aborted.
	Phase string `json:"phase"`
	// Sampled counts the records of the sample retried.
	Sampled    int64     `json:"sampled"`
	SampledAt  *jsonTime `json:"sampled_at"`
	WatchUntil *jsonTime `json:"watch_until"`
	// Verdict is passed, aborted or inconclusive once given, null before.
	Verdict *string              `json:"verdict"`
	Report  records.CanaryReport `json:"report"`
	// RefailRatio is the share of the sample that failed again the same
	// way (what abort_if_refail is compared with).
	RefailRatio float64 `json:"refail_ratio"`
}

func toCanaryJSON(t *records.Task) *canaryJSON {
	if t.Canary == nil {
		return nil
	}
	c := t.CanaryState
	out := &canaryJSON{canarySpecJSON: toCanarySpecJSON(t.Canary), Phase: c.Phase, Sampled: c.Sampled,
		SampledAt: optTime(c.SampledAt), WatchUntil: optTime(c.WatchUntil)}
	if c.Phase == records.CanaryPassed || c.Phase == records.CanaryAborted || c.Phase == records.CanaryInconclusive {
		out.Verdict = &c.Phase
	}
	if c.Report != nil {
		out.Report = *c.Report
	} else {
		out.Report.Sample = c.Sampled
		out.Report.Pending = c.Sampled
	}
	if out.Report.Sample > 0 {
		out.RefailRatio = float64(out.Report.FailedSame) / float64(out.Report.Sample)
	}
	return out
}

type skippedJSON struct {
	Count int64 `json:"count"`
	// Reasons counts them by why (store.Skip*): they add up to Count.
	Reasons map[string]int64 `json:"reasons"`
	// Records are the first 100 a patch skipped, each with why.
	Records []records.SkippedRecord `json:"records"`
}

type taskErrorJSON struct {
	At      jsonTime `json:"at"`
	Message string   `json:"message"`
}

func toTaskJSON(t *records.Task) taskJSON {
	out := taskJSON{ID: t.ID, Kind: string(t.Kind), State: string(t.State), Filter: t.Filter, RateLimit: t.RateLimit, Total: t.Total,
		Processed: t.Processed, Remaining: t.Remaining(), Errors: make([]taskErrorJSON, len(t.Errors)), CancelRequested: t.CancelRequested,
		CreatedBy: t.CreatedBy, Owner: t.LeaseOwner, CreatedAt: jsonTime(t.CreatedAt), StartedAt: optTime(t.StartedAt),
		UpdatedAt: jsonTime(t.UpdatedAt), FinishedAt: optTime(t.FinishedAt),
		Links: map[string]string{"self": BasePath + "/tasks/" + t.ID, "cancel": BasePath + "/tasks/" + t.ID + "/cancel"}}
	for i, e := range t.Errors {
		out.Errors[i] = taskErrorJSON{At: jsonTime(e.At), Message: e.Message}
	}
	out.Patch = t.Patch
	if t.Target != "" {
		out.Target = &t.Target
	}
	if t.TargetQueue != "" {
		out.TargetQueue = &t.TargetQueue
	}
	out.Skipped = skippedJSON{Count: t.Skipped, Reasons: map[string]int64{}, Records: t.SkippedRecords}
	for k, n := range t.SkippedReasons {
		if n != 0 {
			out.Skipped.Reasons[k] = n
		}
	}
	out.Canary = toCanaryJSON(t)
	if out.Skipped.Records == nil {
		out.Skipped.Records = []records.SkippedRecord{}
	}
	switch {
	case t.Total > 0:
		out.Progress = min(1, float64(t.Processed+t.Skipped)/float64(t.Total))
	case t.State == records.TaskCompleted:
		out.Progress = 1 // nothing to do, done
	}
	return out
}

func taskID(c echo.Context) (string, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return "", invalidParam("id", "must be a UUID")
	}
	return id.String(), nil
}

func (s *Server) getTask(c echo.Context) error {
	id, err := taskID(c)
	if err != nil {
		return err
	}
	t, err := s.rec.GetTask(c.Request().Context(), id)
	if errors.Is(err, records.ErrNotFound) || err == nil && !taskVisible(c, t) {
		return notFound("no task with id " + id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toTaskJSON(t))
}

var taskStates = map[records.TaskState]bool{records.TaskPending: true, records.TaskRunning: true, records.TaskCompleted: true,
	records.TaskCancelled: true, records.TaskFailed: true, records.TaskAborted: true}

// taskVisible reports whether the caller may see task t: with read on every
// queue, any; otherwise the tasks it created and those whose filter names a
// queue it may read.
func taskVisible(c echo.Context, t *records.Task) bool {
	p := principal(c)
	if p.AllQueues(auth.ActionRead) || t.CreatedBy == keyName(c) {
		return true
	}
	var f struct {
		Queue string `json:"queue"`
	}
	return json.Unmarshal(t.Filter, &f) == nil && f.Queue != "" && p.Allowed(auth.ActionRead, f.Queue)
}

func (s *Server) listTasks(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, map[string]bool{"state": true, "limit": true, "cursor": true}); err != nil {
		return err
	}
	p := &records.ListTasksParams{State: records.TaskState(q.Get("state"))}
	if p.State != "" && !taskStates[p.State] {
		return invalidParam("state", "must be one of pending, running, completed, cancelled, failed, aborted")
	}
	var err error
	if p.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return err
	}
	if v := q.Get("cursor"); v != "" {
		if p.BeforeID, err = decodeCursor(v); err != nil {
			return invalidParam("cursor", "malformed cursor; pass next_cursor from a previous page")
		}
	}
	ts, more, err := s.rec.ListTasks(c.Request().Context(), p)
	if err != nil {
		return err
	}
	items := make([]taskJSON, 0, len(ts))
	for i := range ts {
		// A caller limited to some queues sees the tasks it created and
		// those of a queue it may read: a page may hold fewer than limit.
		if taskVisible(c, &ts[i]) {
			items = append(items, toTaskJSON(&ts[i]))
		}
	}
	pg := paginationJSON{Total: int64(len(items)), Limit: p.Limit, HasMore: more}
	if more {
		pg.NextCursor = encodeCursor(ts[len(ts)-1].ID)
		pg.Total++ // at least one more; tasks are few, an exact count is not worth a query
		pg.TotalCapped = true
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "pagination": pg})
}

func (s *Server) cancelTask(c echo.Context) error {
	id, err := taskID(c)
	if err != nil {
		return err
	}
	if cur, err := s.rec.GetTask(c.Request().Context(), id); err == nil && !taskVisible(c, cur) {
		return notFound("no task with id " + id)
	}
	t, err := s.rec.CancelTask(c.Request().Context(), id)
	switch {
	case errors.Is(err, records.ErrNotFound):
		return notFound("no task with id " + id)
	case errors.Is(err, records.ErrConflict):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: "task " + id + " has already finished"}
	case err != nil:
		return err
	}
	noteAudit(c, id, nil, &t.Processed)
	return c.JSON(http.StatusAccepted, toTaskJSON(t))
}
