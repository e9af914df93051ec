package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
)

// retryBody is the body of POST /dead-letter/{id}/retry.
type retryBody struct {
	Override *overrideJSON `json:"override"`
}

// overrideJSON changes a record's next redelivery (OJS dead-letter spec §6.3).
type overrideJSON struct {
	// Queue is the target topic of the redelivery.
	Queue *string `json:"queue"`
	// Target is who the redelivery is for: "group" (the consumer group
	// that failed the record) or "topic" (every group); absent: the policy's.
	Target *string `json:"target"`
	// Meta is merged into the record's meta.
	Meta json.RawMessage `json:"meta"`
	// Headers are set on the redelivered record, replacing original headers
	// of the same key.
	Headers []overrideHeader `json:"headers"`
	// Value replaces the redelivered value; the original stays recorded.
	Value         *string `json:"value"`
	ValueEncoding *string `json:"value_encoding"`
	// Retry is a partial OJS RetryPolicy merged onto the record's own.
	Retry json.RawMessage `json:"retry"`
	// Payload is an edited payload (any JSON value): encoded with the
	// record's schema, or as JSON text, it replaces the redelivered value.
	Payload json.RawMessage `json:"payload"`
}

type overrideHeader struct {
	Key      string  `json:"key"`
	Value    string  `json:"value"`
	Encoding *string `json:"encoding"`
}

const maxOverrideHeaders = 100

func (s *Server) retryRecord(c echo.Context) error {
	id, err := recordID(c)
	if err != nil {
		return err
	}
	body, err := readBody(c, true)
	if err != nil {
		return err
	}
	var b retryBody
	if body != nil {
		if err := decodeStrict(body, &b); err != nil {
			return err
		}
	}
	need := []auth.Action{auth.ActionRetry}
	if o := b.Override; o != nil && (o.Value != nil || o.Headers != nil || o.Payload != nil) {
		need = append(need, auth.ActionEdit)
	}
	if err := s.checkRecord(c, id, need...); err != nil {
		return err
	}
	if o := b.Override; o != nil && o.Queue != nil {
		// Redelivering to another topic is a retry into that queue too.
		if pr := principal(c); !pr.Allowed(auth.ActionRetry, *o.Queue) {
			return forbidden(pr, auth.ActionRetry, *o.Queue, "override.queue redelivers the record there")
		}
	}
	p := &records.RetryParams{ID: id}
	if o := b.Override; o != nil {
		if err := parseOverride(o, p); err != nil {
			return err
		}
	}
	noteAudit(c, id, b.Override, count64(1))
	m := s.maskerOf(c)
	if m != nil {
		// What the caller did not see, it sends back masked: the record
		// keeps it (records.RetryParams.Masking).
		p.Masking = m.of
	}
	r, err := s.rec.Retry(c.Request().Context(), p)
	if err != nil {
		return retryError(id, err)
	}
	s.rec.InSchemaOrder(r)
	r = m.record(r)
	out := toRecordJSON(r, !s.cfg.ArchiveDisabled)
	out.Masked = m.masks(r.Queue)
	out.InFlight = &r.InFlight // false: queued, not claimed yet
	out.recordBody = nil
	return writeRecord(c, http.StatusOK, r, toRetriedJSON(r, out))
}

// retryError says why a record could not be retried: a target topic no
// redelivery may go to, a retry policy out of bounds, no topic to go back
// to, in flight or completed.
func retryError(id string, err error) error {
	var target *records.TargetError
	var noRoute *records.NoRouteError
	var pol *records.PolicyError
	var conflict *records.RetryConflictError
	switch {
	case errors.As(err, &target):
		return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeValidationError,
			Message: "override.queue: " + jsonString(target.Topic) + " " + target.Problem + "; name the topic a consumer reads",
			Details: map[string]any{"parameter": "override.queue"}}
	case errors.Is(err, records.ErrNotFound):
		return notFound("no dead-letter record with id " + id)
	case errors.As(err, &pol):
		return policyError(pol.Err, "override.")
	case errors.As(err, &noRoute):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict,
			Message: "record " + id + " has no topic to go back to (its queue " + jsonString(noRoute.Queue) + " " + noRoute.Why +
				"); retry it with override.queue naming the topic to deliver it to",
			Details: map[string]any{"parameter": "override.queue"}}
	case errors.As(err, &conflict):
		return retryConflict(id, conflict)
	}
	return payloadErr(err, "override.payload")
}

// payloadErr says why an edited payload was refused: it does not conform
// (422 naming the field: field plus the value's JSON Pointer), the record's
// payload cannot be edited here (409), or its schema could not be fetched
// (503). Other errors pass through.
func payloadErr(err error, field string) error {
	var pe *records.PayloadError
	var unsupported *records.PayloadUnsupportedError
	switch {
	case errors.As(err, &pe):
		f := field + pe.Pointer
		return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeValidationError, Message: f + ": " + pe.Message,
			Details: map[string]any{"fields": []map[string]string{{"field": f, "message": pe.Message}}, "parameter": f}}
	case errors.As(err, &unsupported):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: field + ": " + unsupported.Error(),
			Details: map[string]any{"parameter": field}}
	case errors.Is(err, records.ErrSchemaUnavailable):
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeBackendError,
			Message: "the record's schema is not cached and the schema registry is unreachable; try again"}
	}
	return err
}

// checkPayloadBody is the body of POST /dead-letter/{id}/payload/check.
type checkPayloadBody struct {
	Payload json.RawMessage `json:"payload"`
}

// checkPayload says whether a payload would do as the record's edited
// payload (the console validates as the operator types); it changes nothing.
func (s *Server) checkPayload(c echo.Context) error {
	id, err := recordID(c)
	if err != nil {
		return err
	}
	var b checkPayloadBody
	if err := bindStrict(c, &b); err != nil {
		return err
	}
	if b.Payload == nil {
		return invalidParam("payload", "required: the edited payload (any JSON value)")
	}
	if err := s.checkRecord(c, id); err != nil {
		return err
	}
	enc, err := s.rec.CheckPayload(c.Request().Context(), id, b.Payload)
	if errors.Is(err, records.ErrNotFound) {
		return notFound("no dead-letter record with id " + id)
	}
	if err != nil {
		return payloadErr(err, "payload")
	}
	return c.JSON(http.StatusOK, map[string]any{"valid": true, "value_schema": enc.Schema, "size": enc.Size})
}

// retryConflict says why a record cannot be retried: it is being produced
// right now, or it is completed. Any other record can be.
func retryConflict(id string, err *records.RetryConflictError) error {
	inFlight := errors.Is(err, records.ErrInFlight)
	details := map[string]any{"in_flight": inFlight}
	cur := err.Record
	if cur != nil {
		details["state"] = cur.State
		if cur.CompletedBy != "" {
			details["completed_by"] = cur.CompletedBy
		}
	}
	var msg string
	switch {
	case inFlight:
		msg = "record " + id + " is being redelivered right now: a scheduler has claimed it and is producing it to its topic; " +
			"retry it once that produce is settled (within seconds; GET the record: in_flight turns false)"
	case cur != nil && cur.CompletedBy == dlq.CompletedByAck:
		msg = "record " + id + " is completed: the consumer acknowledged its redelivery, so there is nothing to retry"
	case cur != nil && cur.State == dlq.StateCompleted:
		msg = "record " + id + " is completed: its redelivery was produced and no failure came back (completion: redelivered); " +
			"a failure that comes back re-opens it"
	default:
		msg = "record " + id + " cannot be retried now: it changed meanwhile; GET it and try again"
	}
	return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: msg, Details: details}
}

// parseOverride reads an override into p; errors name the field. Whether
// its target topic may be used, and how its retry policy merges onto the
// record's, is for records to say.
func parseOverride(o *overrideJSON, p *records.RetryParams) error {
	rd := &dlq.Redelivery{}
	touched := false
	if o.Queue != nil {
		if msg := dlq.TopicNameProblem(*o.Queue); msg != "" {
			return invalidParam("override.queue", msg)
		}
		rd.Topic, touched = *o.Queue, true
	}
	if o.Target != nil {
		if err := checkTarget(*o.Target, "override.target"); err != nil {
			return err
		}
		rd.Target, touched = *o.Target, true
	}
	if len(o.Headers) > maxOverrideHeaders {
		return invalidParam("override.headers", "at most 100 headers")
	}
	for i, h := range o.Headers {
		field := "override.headers[" + itoa(i) + "]"
		if h.Key == "" {
			return invalidParam(field+".key", "required")
		}
		if strings.HasPrefix(h.Key, "redrive.") {
			return invalidParam(field+".key", "redrive.* headers are set by Redrive itself")
		}
		enc := records.EncodingUTF8
		if h.Encoding != nil {
			enc = *h.Encoding
		}
		if enc != records.EncodingUTF8 && enc != records.EncodingBase64 {
			return invalidParam(field+".encoding", "must be utf8 or base64")
		}
		v, err := records.DecodeBytes(h.Value, enc)
		if err != nil {
			return invalidParam(field+".value", "is not valid base64")
		}
		rd.Headers = append(rd.Headers, dlq.Header{Key: h.Key, Value: v})
		touched = true
	}
	if o.Payload != nil && o.Value != nil {
		return invalidParam("override.payload", "cannot be combined with override.value: send the edited JSON "+
			"(override.payload) or the raw bytes (override.value), not both")
	}
	if o.Payload != nil {
		p.Payload = o.Payload
	}
	if o.ValueEncoding != nil && o.Value == nil {
		return invalidParam("override.value_encoding", "only allowed with value")
	}
	if o.Value != nil {
		enc := records.EncodingUTF8
		if o.ValueEncoding != nil {
			enc = *o.ValueEncoding
		}
		if enc != records.EncodingUTF8 && enc != records.EncodingBase64 {
			return invalidParam("override.value_encoding", "must be utf8 or base64")
		}
		v, err := records.DecodeBytes(*o.Value, enc)
		if err != nil {
			return invalidParam("override.value", "is not valid base64")
		}
		rd.Value, rd.ValueSet, touched = v, true, true
	}
	if touched {
		p.Redelivery = rd
	}
	if len(o.Meta) > 0 && string(o.Meta) != "null" {
		var m map[string]any
		if err := json.Unmarshal(o.Meta, &m); err != nil || m == nil {
			return invalidParam("override.meta", "must be a JSON object")
		}
		p.Meta = o.Meta
	}
	if len(o.Retry) > 0 && string(o.Retry) != "null" {
		spec, err := policy.DecodeRetry(o.Retry)
		if err != nil {
			return policyError(err, "override.")
		}
		p.Retry = spec
	}
	return nil
}

// checkTarget refuses a redelivery target that is not group or topic.
func checkTarget(v, field string) error {
	if !policy.Target(v).Valid() {
		return invalidParam(field, "must be group (only the consumer group that failed the record) or topic (every group on the topic), got "+jsonString(v))
	}
	return nil
}

// policyError maps a policy validation error to 422 with field errors.
func policyError(err error, prefix string) error {
	var fes policy.Errors
	var fe *policy.FieldError
	switch {
	case errors.As(err, &fes):
	case errors.As(err, &fe):
		fes = policy.Errors{fe}
	default:
		return invalidParam(strings.TrimSuffix(prefix, "."), err.Error())
	}
	fields := make([]map[string]string, len(fes))
	msgs := make([]string, len(fes))
	for i, e := range fes {
		path := prefix + e.Path
		if e.Path == "" {
			path = strings.TrimSuffix(prefix, ".")
		}
		fields[i] = map[string]string{"field": path, "message": e.Msg}
		msgs[i] = path + ": " + e.Msg
	}
	return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeValidationError,
		Message: strings.Join(msgs, "; "), Details: map[string]any{"fields": fields, "parameter": fields[0]["field"]}}
}

func (s *Server) deleteRecord(c echo.Context) error {
	id, err := recordID(c)
	if err != nil {
		return err
	}
	if err := s.checkRecord(c, id, auth.ActionPurge); err != nil {
		return err
	}
	noteAudit(c, id, nil, count64(1))
	err = s.rec.Delete(c.Request().Context(), id)
	if errors.Is(err, records.ErrNotFound) {
		noteAudit(c, id, nil, count64(0))
		return notFound("no dead-letter record with id " + id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"deleted": true, "id": id, "job_id": id})
}

// bulkBody is the body of the bulk operations.
type bulkBody struct {
	// Filter is read by filter.ParseJSON; absent or null matches every record.
	Filter json.RawMessage `json:"filter"`
	// Confirm runs the operation; without it only the count is returned.
	Confirm bool `json:"confirm"`
	// RateLimit bounds records per second (0: unlimited).
	RateLimit *float64 `json:"rate_limit"`
	// Patch (a retry only) is an RFC 6902 JSON Patch applied to each
	// record's payload.
	Patch json.RawMessage `json:"patch"`
	// Canary (a retry only) redelivers a sample first and watches it.
	Canary json.RawMessage `json:"canary"`
	// Target (a retry only) is who each redelivery is for: group or topic;
	// absent: each record's policy.
	Target *string `json:"target"`
}

// maxRateLimit is the largest records/s a task accepts.
const maxRateLimit = 100_000

func (s *Server) bulkRetry(c echo.Context) error { return s.bulk(c, records.TaskRetry) }
func (s *Server) bulkPurge(c echo.Context) error { return s.bulk(c, records.TaskPurge) }

func (s *Server) bulk(c echo.Context, kind records.TaskKind) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	var b bulkBody
	if err := bindStrict(c, &b); err != nil {
		return err
	}
	f, err := filter.ParseJSON(b.Filter, filter.Bulk, "filter")
	if err != nil {
		return err
	}
	canon := f.Canonical()
	rate := 0.0
	if b.RateLimit != nil {
		rate = *b.RateLimit
		if !(rate == 0 || rate >= policy.MinRateLimit && rate <= maxRateLimit) {
			return invalidParam("rate_limit", fmt.Sprintf("must be 0 (unlimited) or a number of records per second from %v to 100000", policy.MinRateLimit))
		}
	}
	var patch *records.Patch
	if b.Patch != nil && string(b.Patch) != "null" {
		if kind != records.TaskRetry {
			return invalidParam("patch", "only a retry applies a patch")
		}
		if patch, err = records.ParsePatch(b.Patch); err != nil {
			var pe *records.PatchOpError
			if errors.As(err, &pe) && pe.Index >= 0 {
				return invalidParam("patch["+itoa(pe.Index)+"]."+pe.Field, pe.Msg)
			}
			return invalidParam("patch", strings.TrimPrefix(err.Error(), "patch: "))
		}
	}
	var canary *records.Canary
	if b.Canary != nil && string(b.Canary) != "null" {
		if kind != records.TaskRetry {
			return invalidParam("canary", "only a retry has a canary")
		}
		if canary, err = parseCanary(b.Canary, "canary"); err != nil {
			return err
		}
	}
	target := ""
	if b.Target != nil {
		if kind != records.TaskRetry {
			return invalidParam("target", "only a retry has a redelivery target")
		}
		if err := checkTarget(*b.Target, "target"); err != nil {
			return err
		}
		target = *b.Target
	}
	action := auth.ActionPurge
	if kind == records.TaskRetry {
		action = auth.ActionRetry
	}
	globs := queueGlobs(c, action)
	if patch != nil {
		globs = intersectGlobs(globs, queueGlobs(c, auth.ActionEdit))
	}
	if err := s.checkBulkMasking(c, &f, patch != nil); err != nil {
		return err
	}
	res, err := s.rec.Bulk(c.Request().Context(), &records.BulkParams{Kind: kind, Filter: f, Confirm: b.Confirm,
		RateLimit: rate, CreatedBy: keyName(c), Patch: patch, Canary: canary, Target: target, QueueGlobs: globs})
	if err != nil {
		return err
	}
	n := res.N
	noteAudit(c, "dry_run", canon, &n)
	if res.Task == nil {
		out := map[string]any{"dry_run": true, "would_affect": n, "filter": canon,
			"message": "nothing changed; send \"confirm\": true to " + string(kind) + " these records"}
		if kind == records.TaskRetry {
			out["skipped"] = res.Skipped
			if res.Skipped > 0 {
				out["message"] = out["message"].(string) + fmt.Sprintf("; %d records of Redrive's own topics (unparseable ones among them) "+
					"are skipped: retry each with override.queue", res.Skipped)
			}
		}
		if res.Canary != nil {
			out["canary"] = toCanarySpecJSON(res.Canary)
		}
		if pr := res.Patch; pr != nil {
			out["patch"] = map[string]any{"applies": pr.Applies, "fails": pr.Fails, "evaluated": pr.Evaluated,
				"errors": pr.Errors, "samples": pr.Samples}
		}
		return c.JSON(http.StatusOK, out)
	}
	t := res.Task
	noteAudit(c, "task:"+t.ID, canon, &n)
	c.Response().Header().Set(echo.HeaderLocation, BasePath+"/tasks/"+t.ID)
	return c.JSON(http.StatusAccepted, map[string]any{"dry_run": false, "would_affect": n, "task": toTaskJSON(t)})
}

// statsJSON is GET /dead-letter/stats (OJS dead-letter spec §10.1, plus
// by_state and by_exhaustion). by_queue and by_error_type hold the limit
// largest queues and error types; by_queue_others and by_error_type_others
// count the rest, so that each breakdown still adds up to total.
type statsJSON struct {
	Total             int64            `json:"total"`
	ByQueue           map[string]int64 `json:"by_queue"`
	ByQueueOthers     othersJSON       `json:"by_queue_others"`
	ByErrorType       map[string]int64 `json:"by_error_type"`
	ByErrorTypeOthers othersJSON       `json:"by_error_type_others"`
	ByState           map[string]int64 `json:"by_state"`
	ByExhaustion      map[string]int64 `json:"by_exhaustion"`
	OldestAt          *jsonTime        `json:"oldest_at"`
	NewestAt          *jsonTime        `json:"newest_at"`
	Retention         retentionJSON    `json:"retention"`
}

// othersJSON is what a capped breakdown of the stats leaves out: how many
// keys (queues, error types) and their records.
type othersJSON struct {
	Keys    int64 `json:"keys"`
	Records int64 `json:"records"`
}

// statsDefaultLimit is how many queues and error types the stats show when
// no limit is given; a limit is from 1 to maxLimit, as the lists take it.
// The whole breakdown pages on GET /queues (sort=total) and GET
// /dead-letter/error-types.
const statsDefaultLimit = 100

type retentionJSON struct {
	MaxAge      policy.Duration `json:"max_age"`
	MaxCount    int             `json:"max_count"`
	Discarded   policy.Duration `json:"discarded"`
	Completed   policy.Duration `json:"completed"`
	NextPruneAt *jsonTime       `json:"next_prune_at"`
}

func (s *Server) stats(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, map[string]bool{"queue": true, "limit": true}); err != nil {
		return err
	}
	limit := statsDefaultLimit
	if v := q.Get("limit"); v != "" {
		var err error
		if limit, err = parseLimit(v); err != nil {
			return err
		}
	}
	name := q.Get("queue")
	st, err := s.rec.StatsTop(c.Request().Context(), name, queueGlobs(c, auth.ActionRead), limit)
	if err != nil {
		return err
	}
	t := s.queues.Default()
	if name != "" {
		t = s.queues.Resolve(name, "")
	}
	return c.JSON(http.StatusOK, statsJSON{
		Total: st.Total, ByQueue: st.ByQueue, ByErrorType: st.ByErrorType, ByState: st.ByState, ByExhaustion: st.ByExhaustion,
		ByQueueOthers: othersJSON{Keys: st.OtherQueues.Keys, Records: st.OtherQueues.Records}, ByErrorTypeOthers: othersJSON{
			Keys: st.OtherErrorTypes.Keys, Records: st.OtherErrorTypes.Records},
		OldestAt: optTime(st.OldestAt), NewestAt: optTime(st.NewestAt),
		Retention: retentionJSON{MaxAge: policy.Duration(t.DeadLetter.Retention.MaxAge), MaxCount: t.DeadLetter.Retention.MaxCount,
			Discarded: policy.Duration(t.Retention.Discarded), Completed: policy.Duration(t.Retention.Completed),
			NextPruneAt: optTime(s.cfg.NextPruneAt())},
	})
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// deadLetterJobJSON is a dead-letter record as the dead-letter routes show
// it: the record (recordJSON), and error, its latest error, as the OJS job
// envelope carries it (core §5.3 "error", §8.1; HTTP binding §12.1); null
// before any. errors keeps the whole history (dead-letter spec §9.2).
type deadLetterJobJSON struct {
	recordJSON
	Error *latestErrorJSON `json:"error"`
}

// latestErrorJSON is a record's latest error: the core's error object
// (type, message, backtrace) with the code, attempt and time Redrive
// records. truncated says (in a list) that it was cut, as its entry in
// errors says.
type latestErrorJSON struct {
	Type       string   `json:"type"`
	Message    string   `json:"message"`
	Backtrace  []string `json:"backtrace"`
	Code       dlq.Code `json:"code"`
	Attempt    int      `json:"attempt"`
	OccurredAt jsonTime `json:"occurred_at"`
	Truncated  bool     `json:"truncated,omitempty"`
}

// asDeadLetterJob adds a shown record's latest error: the last of its
// errors as shown (masked, in a list cut as the list cuts it).
func asDeadLetterJob(out recordJSON) deadLetterJobJSON {
	j := deadLetterJobJSON{recordJSON: out}
	if n := len(out.Errors); n > 0 {
		e := out.Errors[n-1]
		j.Error = &latestErrorJSON{Type: e.Type, Message: e.Message, Backtrace: e.Backtrace, Code: e.Code,
			Attempt: e.Attempt, OccurredAt: e.OccurredAt, Truncated: e.Truncated}
	}
	return j
}

// retriedJSON is the answer of POST /dead-letter/{id}/retry: the record as
// GET shows it (what Redrive's clients read) and, beside it, job, the
// summary the OJS HTTP binding §12.2 wraps the answer in.
type retriedJSON struct {
	deadLetterJobJSON
	Job retriedJobJSON `json:"job"`
}

// retriedJobJSON is HTTP binding §12.2's job: re_enqueued_at is when the
// retry made the record available again (its new enqueued_at).
type retriedJobJSON struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	State        dlq.State `json:"state"`
	Queue        string    `json:"queue"`
	Attempt      int       `json:"attempt"`
	MaxAttempts  int       `json:"max_attempts"`
	ReEnqueuedAt *jsonTime `json:"re_enqueued_at"`
}

func toRetriedJSON(r *dlq.Record, out recordJSON) retriedJSON {
	at := r.EnqueuedAt
	if at == nil {
		at = &r.UpdatedAt
	}
	return retriedJSON{deadLetterJobJSON: asDeadLetterJob(out), Job: retriedJobJSON{ID: out.ID, Type: out.Type, State: out.State,
		Queue: out.Queue, Attempt: out.Attempt, MaxAttempts: out.MaxAttempts, ReEnqueuedAt: optTime(at)}}
}
