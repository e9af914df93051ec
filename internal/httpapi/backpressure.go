package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/policy"
)

// Backpressure on jobs published over HTTP (OJS backpressure spec;
// docs/api.md#backpressure). A queue's config bounds its depth
// (backpressure.max_depth): a publish that would take it past the bound is
// refused whole with 429 QUEUE_FULL (§5.1, §9.3: a batch is not accepted in
// part), and the answers of a bounded queue's publishes say its depth and
// bound (§7.2), and its pressure once past the warning threshold (§7.3).

// CodeQueueFull is the error code of a publish refused by backpressure (OJS
// backpressure spec §7.1, ojs-errors §4.4: "QUEUE_FULL").
const CodeQueueFull = "QUEUE_FULL"

// The backpressure headers (OJS backpressure spec §7.2, §7.3).
const (
	HeaderQueueDepth    = "X-OJS-Queue-Depth"
	HeaderQueueBound    = "X-OJS-Queue-Bound"
	HeaderQueuePressure = "X-OJS-Queue-Pressure"
)

// backpressureRetryAfter is the Retry-After of a publish refused by
// backpressure: the queue drains as workers take its jobs, at a pace the
// server does not know; the spec's example waits 5 seconds.
const backpressureRetryAfter = 5 * time.Second

// admitJobs decides whether n more jobs may be published to queue now. It
// returns the headers the publish's answer carries — for a bounded queue,
// X-OJS-Queue-Depth (with the n jobs) and X-OJS-Queue-Bound, and
// X-OJS-Queue-Pressure when that depth is past the warning threshold —
// and, when the n jobs would take the queue's depth past its max_depth, a
// 429 QUEUE_FULL (*APIError) to answer instead, with Retry-After and the
// depth as it is among the headers. A
// queue without a bound costs nothing (no read). The depth is read from the
// statistics table and the lease index; two publishes checked at once may
// both pass, by up to their own jobs.
func (s *Server) admitJobs(ctx context.Context, queue string, n int) (http.Header, error) {
	b := s.queues.Resolve(queue, "").Backpressure
	if !b.Bounded() {
		return nil, nil
	}
	depth, err := s.rec.QueueDepth(ctx, queue, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(HeaderQueueBound, strconv.FormatInt(b.MaxDepth, 10))
	after := depth + int64(n)
	if after > b.MaxDepth {
		// Refused: the depth is as it stays.
		h.Set(HeaderQueueDepth, strconv.FormatInt(depth, 10))
		h.Set("Retry-After", strconv.Itoa(int(backpressureRetryAfter/time.Second)))
		jobs := "a job"
		if n != 1 {
			jobs = strconv.Itoa(n) + " jobs"
		}
		return h, &APIError{Status: http.StatusTooManyRequests, Code: CodeQueueFull,
			Message: fmt.Sprintf("queue '%s' has reached its depth bound (%d): %d jobs wait, and %s more would exceed it; retry after %d seconds",
				queue, b.MaxDepth, depth, jobs, int(backpressureRetryAfter/time.Second)),
			Details: map[string]any{"queue": queue, "depth": depth, "bound": b.MaxDepth, "strategy": b.Strategy, "jobs": n}}
	}
	// Admitted: the answer is written once the jobs are stored, and says
	// the depth with them (§7.3's example: depth 42000 of 50000, 0.84).
	h.Set(HeaderQueueDepth, strconv.FormatInt(after, 10))
	if p := pressure(after, b.MaxDepth); p > b.WarningThreshold {
		h.Set(HeaderQueuePressure, strconv.FormatFloat(p, 'f', -1, 64))
	}
	return h, nil
}

// pressure is depth over bound, to two decimals (the spec's 0.84).
func pressure(depth, bound int64) float64 {
	return math.Round(float64(depth)/float64(bound)*100) / 100
}

// checkBackpressureSupported refuses, in a queue config about to be
// stored (raw, its fields under prefix), the backpressure the spec defines
// and Redrive does not apply — strategy block or drop_oldest, a size bound —
// with 422 unsupported naming the field (OJS HTTP binding §16.3), before the
// config's other checks answer a validation error.
func checkBackpressureSupported(raw json.RawMessage, prefix string) error {
	var probe struct {
		Backpressure *policy.BackpressureSpec `json:"backpressure"`
	}
	// A body that does not decode so is refused, naming its field, by the
	// strict decoding that follows.
	if json.Unmarshal(raw, &probe) != nil {
		return nil
	}
	field, msg := policy.UnsupportedBackpressure(probe.Backpressure)
	if field == "" {
		return nil
	}
	name := prefix + "backpressure." + field
	return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeUnsupported, Message: name + ": " + msg,
		Details: map[string]any{"parameter": name}}
}

// admit is admitJobs for a handler: it sets the headers admitJobs returns
// on c's answer (on the 429 it returns as well) and returns its error.
// POST /jobs calls it with the job's queue and 1 before storing the job;
// POST /jobs/batch once per queue of the batch with that queue's number of
// jobs, before storing any, answering the first error (§9.3: the whole
// batch is refused).
func (s *Server) admit(c echo.Context, queue string, n int) error {
	h, err := s.admitJobs(c.Request().Context(), queue, n)
	for k, vs := range h {
		c.Response().Header()[k] = vs
	}
	return err
}
