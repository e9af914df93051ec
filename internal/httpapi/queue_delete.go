package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
	"github.com/redrive/redrive/internal/records"
)

// deleteQueueBody is the optional body of DELETE /queues/{name}
// (queue-config spec §5.3, §9.4).
type deleteQueueBody struct {
	// Strategy is reject (the default), discard or move.
	Strategy *string `json:"strategy"`
	// TargetQueue is where a move re-homes the records.
	TargetQueue *string `json:"target_queue"`
	// Confirm must be true to run a discard or move (admin API §4 "Safe
	// by default"): absent or false, the delete is refused with 400. A
	// reject needs none (it changes no record) and ignores it.
	Confirm *bool `json:"confirm"`
	// DryRun asks a discard or move for its counts alone: nothing changes.
	DryRun *bool `json:"dry_run"`
	// RateLimit bounds a discard's or move's records per second (0: unlimited).
	RateLimit *float64 `json:"rate_limit"`
}

// parseDeleteQueue reads and checks the body of a queue delete: every
// field, before anything is changed.
func (s *Server) parseDeleteQueue(c echo.Context, name string) (*records.QueueDeleteParams, error) {
	body, err := readBody(c, true)
	if err != nil {
		return nil, err
	}
	var b deleteQueueBody
	if body != nil {
		if err := decodeStrict(body, &b); err != nil {
			return nil, err
		}
	}
	p := &records.QueueDeleteParams{Queue: name, Strategy: records.StrategyReject, CreatedBy: keyName(c)}
	if b.Strategy != nil {
		p.Strategy = records.QueueStrategy(*b.Strategy)
		known := make([]string, len(records.QueueStrategies))
		for i, k := range records.QueueStrategies {
			known[i] = string(k)
		}
		if !slices.Contains(records.QueueStrategies, p.Strategy) {
			return nil, invalidParam("strategy", "must be one of "+strings.Join(known, ", ")+", got "+jsonString(*b.Strategy))
		}
	}
	if b.TargetQueue != nil {
		if p.Strategy != records.StrategyMove {
			return nil, invalidParam("target_queue", "only strategy move has a target queue")
		}
		t := *b.TargetQueue
		if t == name {
			return nil, invalidParam("target_queue", "must be another queue than "+name+", the one deleted")
		}
		if err := s.checkJobQueue(t, "target_queue"); err != nil {
			return nil, err
		}
		p.TargetQueue = t
	} else if p.Strategy == records.StrategyMove {
		return nil, invalidParam("target_queue", "required with strategy move: the queue the records go to")
	}
	dryRun := b.DryRun != nil && *b.DryRun
	confirm := b.Confirm != nil && *b.Confirm
	switch {
	case p.Strategy == records.StrategyReject && b.DryRun != nil:
		return nil, invalidParam("dry_run", "only strategies discard and move have a preview; a reject changes no record")
	case dryRun && b.Confirm != nil:
		return nil, invalidParam("confirm", "cannot be combined with dry_run: send \"dry_run\": true for the counts, "+
			"or \"confirm\": true to "+string(p.Strategy)+" the records")
	case p.Strategy != records.StrategyReject && !dryRun && !confirm:
		return nil, invalidParam("confirm", "must be true: strategy "+string(p.Strategy)+" "+strategyDoes(p.Strategy)+
			" (admin API \"Safe by default\"); send \"dry_run\": true to see the counts first")
	}
	p.Confirm = confirm
	if b.RateLimit != nil {
		if p.Strategy == records.StrategyReject {
			return nil, invalidParam("rate_limit", "only strategies discard and move run a task")
		}
		rate := *b.RateLimit
		if !(rate == 0 || rate >= policy.MinRateLimit && rate <= maxRateLimit) {
			return nil, invalidParam("rate_limit", fmt.Sprintf("must be 0 (unlimited) or a number of records per second from %v to 100000", policy.MinRateLimit))
		}
		p.RateLimit = rate
	}
	return p, nil
}

// strategyDoes says what a discard or move does with the queue's records.
func strategyDoes(st records.QueueStrategy) string {
	if st == records.StrategyMove {
		return "moves every record waiting in the queue to target_queue and deletes the queue"
	}
	return "discards every record waiting in the queue and deletes the queue"
}

// deleteQueueAudit is what the audit entry of a queue delete shows as its
// filter: the queue's records, and what the delete does with them.
func deleteQueueAudit(p *records.QueueDeleteParams) map[string]string {
	m := map[string]string{"queue": p.Queue, "strategy": string(p.Strategy)}
	if p.TargetQueue != "" {
		m["target_queue"] = p.TargetQueue
	}
	return m
}

func (s *Server) deleteQueue(c echo.Context) error {
	name, err := queueName(c)
	if err != nil {
		return err
	}
	// Deleting a queue deletes its records too: purge as well as configure.
	if err := mayQueue(principal(c), auth.ActionPurge, name); err != nil {
		return err
	}
	if name == queue.DefaultName {
		return invalidParam("name", defaultIsLayer+": it cannot be deleted; PUT an empty config to reset it")
	}
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	noteAudit(c, name, nil, nil)
	p, err := s.parseDeleteQueue(c, name)
	if err != nil {
		return err
	}
	noteAudit(c, name, deleteQueueAudit(p), nil)
	if file := s.queues.DeclaredIn(name); file != "" {
		return readOnly(name, file)
	}
	ctx := c.Request().Context()
	if p.Strategy == records.StrategyReject {
		return s.rejectDelete(c, name)
	}
	res, err := s.rec.DeleteQueueRecords(ctx, &records.QueueDeleteParams{Queue: p.Queue, Strategy: p.Strategy,
		TargetQueue: p.TargetQueue, RateLimit: p.RateLimit, CreatedBy: p.CreatedBy})
	if err != nil {
		return err
	}
	n := res.Counts.Total()
	noteAudit(c, name, deleteQueueAudit(p), &n)
	out := map[string]any{"queue": name, "strategy": p.Strategy, "target_queue": nil, "jobs_affected": n,
		"by_state":  map[string]int64{"retryable": res.Counts.Retryable, "available": res.Counts.Available},
		"in_flight": res.Counts.InFlight}
	if p.TargetQueue != "" {
		out["target_queue"] = p.TargetQueue
	}
	if !p.Confirm {
		// "dry_run": true asked for the counts alone.
		out["dry_run"] = true
		out["message"] = fmt.Sprintf("nothing changed (dry_run); send \"confirm\": true to %s these records and delete the queue", p.Strategy)
		return c.JSON(http.StatusOK, out)
	}
	if n == 0 && res.Counts.InFlight == 0 {
		// Nothing to take: the delete is the reject's, at once.
		return s.rejectDelete(c, name, p)
	}
	if res, err = s.rec.DeleteQueueRecords(ctx, p); err != nil {
		return err
	}
	n = res.Counts.Total()
	noteAudit(c, name, deleteQueueAudit(p), &n)
	noteChange(c, configOf(res.Before), configOf(res.After))
	s.publishQueue(c, events.QueuePaused, name)
	out["dry_run"], out["jobs_affected"], out["state"] = false, n, policy.TopicPaused
	out["by_state"] = map[string]int64{"retryable": res.Counts.Retryable, "available": res.Counts.Available}
	out["in_flight"] = res.Counts.InFlight
	out["task"] = toTaskJSON(res.Task)
	c.Response().Header().Set(echo.HeaderLocation, BasePath+"/tasks/"+res.Task.ID)
	return c.JSON(http.StatusAccepted, out)
}

// rejectDelete deletes a queue with no records waiting (strategy reject,
// or a discard or move with nothing to take): its API config is removed at
// once. 409 while records wait for redelivery; 404 without an API config.
func (s *Server) rejectDelete(c echo.Context, name string, asked ...*records.QueueDeleteParams) error {
	ctx := c.Request().Context()
	st, err := s.rec.Stats(ctx, name)
	if err != nil {
		return err
	}
	// Strategy reject (queue-config spec §5.3): records still waiting for
	// redelivery keep their topic's config.
	if d := statsOf(st.ByQueueState[name]).Depth; d > 0 {
		return &APIError{Status: http.StatusConflict, Code: CodeConflict,
			Message: "queue " + name + " has records waiting for redelivery; retry, settle or purge them first, " +
				"or delete it with strategy discard or move",
			Details: map[string]any{"depth": d, "strategy": "reject"}}
	}
	before, err := s.apiLayer(ctx, name)
	if err != nil {
		return err
	}
	if err := s.rec.DeleteQueue(ctx, name); errors.Is(err, records.ErrNotFound) {
		return notFound("queue " + name + " has no API config to delete")
	} else if err != nil {
		return err
	}
	noteChange(c, configOf(before), nil)
	if err := s.queues.Refresh(ctx); err != nil {
		return err
	}
	strategy := records.StrategyReject
	out := map[string]any{"queue": name, "strategy": strategy, "deleted": true}
	d := events.QueueDeletedData{Queue: name, Strategy: string(strategy)}
	if len(asked) > 0 {
		p := asked[0]
		out["strategy"], out["dry_run"], out["jobs_affected"] = p.Strategy, false, 0
		d.Strategy, d.TargetQueue = string(p.Strategy), p.TargetQueue
		if p.TargetQueue != "" {
			out["target_queue"] = p.TargetQueue
		}
	}
	s.cfg.Events.Publish(ctx, events.Deleted(d))
	return c.JSON(http.StatusOK, out)
}
