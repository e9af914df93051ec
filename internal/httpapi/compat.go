package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/records"
)

// The compatibility routes speak the reference FastAPI DLQ's shapes
// (/api/dlq/*) over Redrive's records. A queue "dlq:orders" (or just
// "orders") is the dead letters (state discarded) of source topic orders.
// Unlike the reference, requeue answers success only once the scheduler has
// produced the records to Kafka; the records stay stored until then, so a
// Kafka outage answers 503 and loses nothing. Outages never answer zeros.

const compatPrefix = "dlq:"

// maxRequeueAll bounds one requeue-all call (the reference's
// max_requeue_iterations); call again, or use the bulk API, for more.
const maxRequeueAll = 1000

func compatQueue(c echo.Context) (dlqName, topic string, err error) {
	raw := c.Param("queue")
	topic = strings.TrimPrefix(raw, compatPrefix)
	if msg := dlq.TopicNameProblem(topic); msg != "" {
		return "", "", invalidParam("queue_name", msg)
	}
	return compatPrefix + topic, topic, nil
}

func (s *Server) compatStats(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	st, err := s.rec.Stats(c.Request().Context(), "")
	if err != nil {
		return err
	}
	out := map[string]int64{}
	var total int64
	for q, m := range st.ByQueueState {
		if n := m[string(dlq.StateDiscarded)]; n > 0 {
			out[q+"_count"] = n
			total += n
		}
	}
	out["total_count"] = total
	return c.JSON(http.StatusOK, out)
}

// jobFailureJSON is the reference's JobFailure shape, plus the record id.
type jobFailureJSON struct {
	ID            string          `json:"id"`
	OriginalJob   json.RawMessage `json:"original_job"`
	Error         string          `json:"error"`
	AttemptCount  int             `json:"attempt_count"`
	FirstFailedAt *string         `json:"first_failed_at"`
	LastFailedAt  *string         `json:"last_failed_at"`
	QueueName     string          `json:"queue_name"`
	ErrorType     *string         `json:"error_type"`
	StackTrace    *string         `json:"stack_trace"`
	HTTPStatus    *int            `json:"http_status"`
	ResponseBody  *string         `json:"response_body"`
	RetryDelays   []float64       `json:"retry_delays"`
	Context       map[string]any  `json:"context"`
}

// toJobFailure shows a whole record (the job a requeue answers with).
func toJobFailure(r *dlq.Record) jobFailureJSON {
	var first *time.Time
	if len(r.Errors) > 0 {
		first = &r.Errors[0].OccurredAt
	}
	return jobFailureOf(toRecordJSON(r, true), first, max(r.Attempt, len(r.Errors)))
}

// toJobFailurePreview shows a record of a list: its value a preview as in
// GET /ojs/v1/dead-letter (original_job is the value's text when it was
// cut, and context says value_truncated and value_size), its latest error cut.
func toJobFailurePreview(p *records.RecordPreview) jobFailureJSON {
	j := toPreviewJSON(p, true)
	out := jobFailureOf(j, p.FirstErrorAt, max(p.Record.Attempt, p.ErrorCount))
	if j.ValueTruncated {
		out.Context["value_truncated"], out.Context["value_size"] = true, j.ValueSize
	}
	return out
}

// jobFailureOf shapes a record as the reference's JobFailure (the compat
// shape shows no archive state); first is when its first kept error happened.
func jobFailureOf(j recordJSON, first *time.Time, attempts int) jobFailureJSON {
	out := jobFailureJSON{ID: j.ID, QueueName: j.Queue, AttemptCount: attempts,
		Context: map[string]any{"state": j.State, "exhaustion": j.Exhaustion, "format": j.Format, "key": j.Key,
			"source": j.Source, "dlq": j.DLQ}}
	switch {
	case j.Payload != nil:
		out.OriginalJob = j.Payload
	case j.Value != nil:
		out.OriginalJob, _ = json.Marshal(*j.Value)
	default:
		out.OriginalJob = json.RawMessage("null")
	}
	if len(j.Errors) > 0 {
		last := j.Errors[len(j.Errors)-1]
		l := time.Time(last.OccurredAt).UTC().Format(timeLayout)
		out.LastFailedAt = &l
		if first != nil {
			f := first.UTC().Format(timeLayout)
			out.FirstFailedAt = &f
		}
		out.Error = last.Message
		et := last.Type
		out.ErrorType = &et
		if len(last.Backtrace) > 0 {
			bt := strings.Join(last.Backtrace, "\n")
			out.StackTrace = &bt
		}
	}
	return out
}

func (s *Server) compatJobs(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, map[string]bool{"start": true, "limit": true}); err != nil {
		return err
	}
	name, topic, err := compatQueue(c)
	if err != nil {
		return err
	}
	start := 0
	if v := q.Get("start"); v != "" {
		if start, err = strconv.Atoi(v); err != nil || start < 0 || start > 1_000_000 {
			return invalidParam("start", "must be an integer from 0 to 1000000")
		}
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxLimit {
			return invalidParam("limit", "must be an integer from 1 to 1000")
		}
	}
	page, err := s.rec.List(c.Request().Context(), &records.ListParams{
		Filter: records.DeadLetters(topic), Limit: limit, Offset: start})
	if err != nil {
		return err
	}
	items := make([]jobFailureJSON, len(page.Records))
	m := s.maskerOf(c)
	for i := range page.Records {
		items[i] = toJobFailurePreview(m.preview(&page.Records[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"queue_name": name, "items": items,
		"pagination": map[string]any{"total": page.Total, "limit": limit, "offset": start, "has_more": page.HasMore}})
}

// compatRequeue retries the oldest dead letter of the queue (all of them, up
// to maxRequeueAll, with all) and waits until the scheduler produced them.
func (s *Server) compatRequeue(all bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := checkParams(c.QueryParams(), nil); err != nil {
			return err
		}
		name, topic, err := compatQueue(c)
		if err != nil {
			return err
		}
		n := 1
		if all {
			n = maxRequeueAll
		}
		ctx := c.Request().Context()
		f := records.DeadLetters(topic)
		canon := f.Canonical()
		noteAudit(c, topic, canon, nil)
		ids, err := s.rec.RequeueDeadLetters(ctx, topic, n)
		if err != nil {
			return err
		}
		noteAudit(c, topic, canon, count64(len(ids)))
		if len(ids) == 0 {
			return c.JSON(http.StatusOK, map[string]any{"success": false, "message": "No jobs to requeue in " + name, "job": nil})
		}
		if err := s.waitRedelivered(ctx, ids); err != nil {
			return err
		}
		out := map[string]any{"success": true, "job": nil}
		if all {
			out["message"] = fmt.Sprintf("Requeued %d jobs from %s to %s", len(ids), name, topic)
		} else {
			out["message"] = fmt.Sprintf("Job requeued from %s to %s", name, topic)
			if r, err := s.rec.Get(ctx, ids[0]); err == nil {
				out["job"] = toJobFailure(s.maskerOf(c).record(r)).OriginalJob
			}
		}
		return c.JSON(http.StatusOK, out)
	}
}

// waitRedelivered waits until the scheduler produced every record of ids, or
// answers 503: they stay queued and go out when Kafka is reachable.
func (s *Server) waitRedelivered(ctx context.Context, ids []string) error {
	// Wall time: how long a client waits for its answer.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequeueWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := s.rec.Redelivered(ctx, ids)
		if err == nil && n == len(ids) {
			return nil
		}
		select {
		case <-ctx.Done():
			return &APIError{Status: http.StatusServiceUnavailable, Code: CodeBackendError,
				Message: fmt.Sprintf("%d of %d records reached Kafka in time; the rest stay queued and are redelivered when Kafka is reachable", n, len(ids)),
				Details: map[string]any{"queued": len(ids), "redelivered": n}}
		case <-tick.C:
			s.rec.Wake()
		}
	}
}

func (s *Server) compatClear(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	name, topic, err := compatQueue(c)
	if err != nil {
		return err
	}
	n, err := s.rec.ClearDeadLetters(c.Request().Context(), topic)
	f := records.DeadLetters(topic)
	noteAudit(c, topic, f.Canonical(), &n)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"success": true, "message": fmt.Sprintf("Cleared %d jobs from %s", n, name), "queue_name": name})
}
