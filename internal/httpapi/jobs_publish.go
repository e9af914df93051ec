package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
)

// Publishing jobs over HTTP (OJS HTTP binding §9.1, §9.2): one envelope to
// POST /jobs, or many to POST /jobs/batch, stored all or none.

// CodeDuplicate is the error code (409) of a job whose id, or unique key, a
// job already has (OJS errors §4.2, HTTP binding §9.1).
const CodeDuplicate = "duplicate"

// maxBatchJobs bounds the jobs of one POST /jobs/batch.
const maxBatchJobs = 1000

func (s *Server) publishJob(c echo.Context) error {
	ojsMedia(c)
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	// An empty body is no JSON either: decodeEnvelope answers both alike.
	body, err := readBody(c, true)
	if err != nil {
		return err
	}
	p, err := s.publishParams(body, s.cfg.Now())
	if err != nil {
		return err
	}
	jobs, err := s.publish(c, []*records.PublishParams{p})
	if err != nil {
		return err
	}
	j := jobs[0]
	c.Response().Header().Set(echo.HeaderLocation, jobPath+j.Record.ID)
	if j.Deduplicated {
		// Unique jobs §5.4: 200, not 201, with the job holding the key.
		return c.JSON(http.StatusOK, map[string]any{"job": toJobJSON(j), "deduplicated": true})
	}
	return c.JSON(http.StatusCreated, map[string]any{"job": toJobJSON(j)})
}

// batchBody is POST /jobs/batch: each job an envelope as POST /jobs takes.
type batchBody struct {
	Jobs []json.RawMessage `json:"jobs"`
}

func (s *Server) publishBatch(c echo.Context) error {
	ojsMedia(c)
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	var b batchBody
	if err := bindStrict(c, &b); err != nil {
		return err
	}
	if len(b.Jobs) == 0 {
		return invalidParam("jobs", "required: a JSON array of job envelopes, at least one")
	}
	if len(b.Jobs) > maxBatchJobs {
		return invalidParam("jobs", fmt.Sprintf("at most %d jobs in one batch, got %d", maxBatchJobs, len(b.Jobs)))
	}
	now := s.cfg.Now()
	ps := make([]*records.PublishParams, len(b.Jobs))
	for i, raw := range b.Jobs {
		p, err := s.publishParams(raw, now)
		if err != nil {
			return inBatch(err, i)
		}
		ps[i] = p
	}
	jobs, err := s.publish(c, ps)
	if err != nil {
		return err
	}
	out := make([]jobJSON, len(jobs))
	for i, j := range jobs {
		out[i] = toJobJSON(j)
		out[i].Deduplicated = j.Deduplicated
	}
	return c.JSON(http.StatusCreated, map[string]any{"jobs": out, "count": len(out)})
}

// inBatch is err about the job at index i of a batch (HTTP binding §9.2:
// "If any job in the batch fails validation, the entire batch is
// rejected"): its field becomes jobs[i].field, and details say the index.
func inBatch(err error, i int) error {
	var ae *APIError
	if !errors.As(err, &ae) {
		return err
	}
	out := *ae
	prefix := fmt.Sprintf("jobs[%d]", i)
	out.Details = map[string]any{"index": i}
	for k, v := range ae.Details {
		out.Details[k] = v
	}
	if f, ok := ae.Details["parameter"].(string); ok {
		out.Details["parameter"] = prefix + "." + f
		out.Message = prefix + "." + ae.Message // the message starts with the field
	} else {
		out.Message = prefix + ": " + ae.Message
	}
	return &out
}

// publish stores jobs, once each queue's backpressure admits them
// (backpressure.go: 429 when a bounded queue is full, its depth headers
// either way), and answers a duplicate or a policy out of bounds.
func (s *Server) publish(c echo.Context, ps []*records.PublishParams) ([]*records.Job, error) {
	n := map[string]int{}
	var queues []string
	for _, p := range ps {
		if n[p.Queue] == 0 {
			queues = append(queues, p.Queue)
		}
		n[p.Queue]++
	}
	for _, q := range queues {
		if err := s.admit(c, q, n[q]); err != nil {
			return nil, err
		}
	}
	jobs, err := s.rec.PublishJobs(c.Request().Context(), ps)
	var pol *records.PolicyError
	var dup *records.DuplicateJobError
	var udup *records.UniqueDuplicateError
	field := func(name string, index int) string {
		if len(ps) > 1 {
			return fmt.Sprintf("jobs[%d].%s", index, name)
		}
		return name
	}
	switch {
	case errors.As(err, &pol):
		return nil, policyError(pol.Err, "retry.")
	case errors.Is(err, records.ErrUniqueArgsKeys):
		return nil, invalidParam(field("unique.args_keys", 0), err.Error())
	case errors.As(err, &udup):
		// Unique jobs §5.1: 409 with the standard duplicate code, naming
		// the existing job.
		return nil, &APIError{Status: http.StatusConflict, Code: CodeDuplicate,
			Message: fmt.Sprintf("%s: job %s (%s) holds this job's uniqueness key: it is a duplicate", field("unique", udup.Index), udup.Holder, udup.HolderState),
			Details: map[string]any{"parameter": field("unique", udup.Index), "existing_job_id": udup.Holder,
				"existing_job_state": udup.HolderState, "uniqueness_key": udup.Key}}
	case errors.As(err, &dup):
		f := field("id", dup.Index)
		return nil, &APIError{Status: http.StatusConflict, Code: CodeDuplicate,
			Message: f + ": a job with id " + dup.ID + " exists already; leave id out for a new one",
			Details: map[string]any{"parameter": f, "existing_job_id": dup.ID}}
	case err != nil:
		return nil, err
	}
	return jobs, nil
}

// publishParams checks one envelope and makes what PublishJobs takes.
func (s *Server) publishParams(body []byte, now time.Time) (*records.PublishParams, error) {
	b, err := decodeEnvelope(body)
	if err != nil {
		return nil, err
	}
	if b.Type == "" {
		return nil, invalidParam("type", "required: the job's type, such as \"email.send\"")
	}
	if msg := jobTypeProblem(b.Type); msg != "" {
		return nil, invalidParam("type", msg)
	}
	q := DefaultJobQueue
	if b.Queue != nil {
		q = *b.Queue
	}
	if err := s.checkJobQueue(q, b.QueueField); err != nil {
		return nil, err
	}
	if msg := jobQueueProblem(q); msg != "" {
		return nil, invalidParam(b.QueueField, msg)
	}
	if isNull(b.Args) {
		return nil, invalidParam("args", "required: a JSON array of the job's arguments")
	}
	if t := bytes.TrimSpace(b.Args); t[0] != '[' || !json.Valid(t) {
		return nil, invalidParam("args", "must be a JSON array")
	}
	p := &records.PublishParams{ID: b.ID, Type: b.Type, Queue: q, Args: compactKeep(b.Args), Now: now, DelayUntil: b.DelayUntil}
	if !isNull(b.Unique) {
		if p.Unique, err = decodeUnique(b.Unique, "unique"); err != nil {
			return nil, err
		}
	}
	if b.Priority != nil {
		p.Priority = int16(*b.Priority)
	}
	if b.VisibilityMs != nil {
		p.Visibility = time.Duration(*b.VisibilityMs) * time.Millisecond
	}
	if b.TimeoutMs != nil {
		p.Timeout = time.Duration(*b.TimeoutMs) * time.Millisecond
	}
	if !isNull(b.Meta) {
		if t := bytes.TrimSpace(b.Meta); t[0] != '{' {
			return nil, invalidParam("meta", "must be a JSON object")
		}
		p.Meta = b.Meta
	}
	if !isNull(b.Retry) {
		spec, err := policy.DecodeRetry(b.Retry)
		if err != nil {
			return nil, policyError(err, "")
		}
		p.Retry = spec
	}
	if p.Attributes, err = b.keptAttributes(); err != nil {
		return nil, err
	}
	return p, nil
}
