package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
)

// replayRuleJSON is a replay rule on the wire (OJS dead-letter spec §7.1 plus
// rate_limit and window). Rules from policy files are listed with source
// "policy" and the queues they apply to; they are read-only here.
type replayRuleJSON struct {
	Name       string          `json:"name"`
	Filter     json.RawMessage `json:"filter"`
	Delay      policy.Duration `json:"delay"`
	MaxReplays int             `json:"max_replays"`
	Enabled    bool            `json:"enabled"`
	RateLimit  float64         `json:"rate_limit"`
	Window     *windowJSON     `json:"window"`
	Source     string          `json:"source"`
	Queues     []string        `json:"queues,omitempty"`
	CreatedAt  *time.Time      `json:"created_at,omitempty"`
	UpdatedAt  *time.Time      `json:"updated_at,omitempty"`
}

type windowJSON struct {
	Start    string `json:"start"`
	End      string `json:"end"`
	TimeZone string `json:"time_zone,omitempty"`
}

// replayRuleBody is the body of POST and PUT: name, filter, delay and
// max_replays are required; enabled defaults to true, rate_limit to 0
// (unlimited), window to none.
type replayRuleBody struct {
	Name string `json:"name"`
	// Filter is read by filter.ParseJSON (the keys replay rules take).
	Filter     json.RawMessage `json:"filter"`
	Delay      *string         `json:"delay"`
	MaxReplays *int            `json:"max_replays"`
	Enabled    *bool           `json:"enabled"`
	RateLimit  *float64        `json:"rate_limit"`
	Window     *windowJSON     `json:"window"`
}

func (s *Server) listReplayRules(c echo.Context) error {
	ctx := c.Request().Context()
	var items []replayRuleJSON
	if s.cfg.Replay != nil {
		rules, err := s.cfg.Replay.Rules(ctx)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if r.Source == maintenance.SourcePolicy {
				items = append(items, policyRuleJSON(r))
			}
		}
	}
	stored, err := s.rec.ListReplayRules(ctx)
	if err != nil {
		return err
	}
	for i := range stored {
		items = append(items, storedRuleJSON(&stored[i]))
	}
	// A caller limited to some queues sees the rules about one of them.
	shown := []replayRuleJSON{}
	for _, it := range items {
		if ruleVisible(c, it) {
			shown = append(shown, it)
		}
	}
	items = shown
	return c.JSON(http.StatusOK, map[string]any{"items": items, "pagination": map[string]any{
		"total": len(items), "limit": len(items), "has_more": false}})
}

func (s *Server) getReplayRule(c echo.Context) error {
	name := c.Param("name")
	r, err := s.rec.GetReplayRule(c.Request().Context(), name)
	if errors.Is(err, records.ErrNotFound) {
		if pr, ok, perr := s.policyRule(c, name); perr != nil {
			return perr
		} else if ok && ruleVisible(c, policyRuleJSON(pr)) {
			return c.JSON(http.StatusOK, policyRuleJSON(pr))
		}
		return notFound(fmt.Sprintf("replay rule %q not found", name))
	}
	if err != nil {
		return err
	}
	out := storedRuleJSON(r)
	if !ruleVisible(c, out) {
		return notFound(fmt.Sprintf("replay rule %q not found", name))
	}
	return c.JSON(http.StatusOK, out)
}

// ruleVisible reports whether the caller may see a replay rule: with read
// on every queue, any; otherwise a rule whose filter names a queue, or
// whose policy file names queues, all of which it may read.
func ruleVisible(c echo.Context, r replayRuleJSON) bool {
	p := principal(c)
	if p.AllQueues(auth.ActionRead) {
		return true
	}
	queues := r.Queues
	var f struct {
		Queue string `json:"queue"`
	}
	if json.Unmarshal(r.Filter, &f) == nil && f.Queue != "" {
		queues = append(slices.Clip(queues), f.Queue)
	}
	if len(queues) == 0 {
		return false
	}
	for _, q := range queues {
		if !p.Allowed(auth.ActionRead, q) {
			return false
		}
	}
	return true
}

func (s *Server) createReplayRule(c echo.Context) error {
	r, err := s.decodeReplayRule(c, "")
	if err != nil {
		return err
	}
	noteAudit(c, r.Name, nil, nil)
	if err := s.refusePolicyRule(c, r.Name); err != nil {
		return err
	}
	now := s.cfg.Now().UTC()
	r.CreatedAt, r.UpdatedAt = now, now
	if err := s.rec.CreateReplayRule(c.Request().Context(), r); errors.Is(err, records.ErrRuleExists) {
		return &APIError{Status: http.StatusConflict, Code: CodeConflict,
			Message: fmt.Sprintf("replay rule %q already exists; use PUT to change it", r.Name), Details: map[string]any{"name": r.Name}}
	} else if err != nil {
		return err
	}
	noteChange(c, nil, storedRuleJSON(r))
	s.triggerReplay()
	return c.JSON(http.StatusCreated, storedRuleJSON(r))
}

func (s *Server) putReplayRule(c echo.Context) error {
	name := c.Param("name")
	r, err := s.decodeReplayRule(c, name)
	if err != nil {
		return err
	}
	if err := s.refusePolicyRule(c, name); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var before any
	if prev, err := s.rec.GetReplayRule(ctx, name); err == nil {
		before = storedRuleJSON(prev)
	} else if !errors.Is(err, records.ErrNotFound) {
		return err
	}
	r.UpdatedAt = s.cfg.Now().UTC()
	status := http.StatusOK
	err = s.rec.UpdateReplayRule(ctx, r)
	if errors.Is(err, records.ErrNotFound) {
		r.CreatedAt, status = r.UpdatedAt, http.StatusCreated
		err = s.rec.CreateReplayRule(ctx, r)
	}
	if err != nil {
		return err
	}
	saved, err := s.rec.GetReplayRule(ctx, name)
	if err != nil {
		return err
	}
	noteChange(c, before, storedRuleJSON(saved))
	s.triggerReplay()
	return c.JSON(status, storedRuleJSON(saved))
}

func (s *Server) deleteReplayRule(c echo.Context) error {
	name := c.Param("name")
	if err := s.refusePolicyRule(c, name); err != nil {
		return err
	}
	ctx := c.Request().Context()
	prev, err := s.rec.GetReplayRule(ctx, name)
	if errors.Is(err, records.ErrNotFound) {
		return notFound(fmt.Sprintf("replay rule %q not found", name))
	} else if err != nil {
		return err
	}
	if err := s.rec.DeleteReplayRule(ctx, name); errors.Is(err, records.ErrNotFound) {
		return notFound(fmt.Sprintf("replay rule %q not found", name))
	} else if err != nil {
		return err
	}
	noteChange(c, storedRuleJSON(prev), nil)
	return c.JSON(http.StatusOK, map[string]any{"deleted": true, "name": name})
}

func (s *Server) triggerReplay() {
	if s.cfg.Replay != nil {
		s.cfg.Replay.Trigger()
	}
}

// policyRule finds a rule of the policy files by name.
func (s *Server) policyRule(c echo.Context, name string) (maintenance.Rule, bool, error) {
	if s.cfg.Replay == nil {
		return maintenance.Rule{}, false, nil
	}
	rules, err := s.cfg.Replay.Rules(c.Request().Context())
	if err != nil {
		return maintenance.Rule{}, false, err
	}
	for _, r := range rules {
		if r.Source == maintenance.SourcePolicy && r.Name == name {
			return r, true, nil
		}
	}
	return maintenance.Rule{}, false, nil
}

// refusePolicyRule answers 409 for a rule the policy files declare.
func (s *Server) refusePolicyRule(c echo.Context, name string) error {
	_, ok, err := s.policyRule(c, name)
	if err != nil {
		return err
	}
	if ok {
		return &APIError{Status: http.StatusConflict, Code: CodeConflict,
			Message: fmt.Sprintf("replay rule %q is declared in the policy files; change it there", name), Details: map[string]any{"name": name}}
	}
	return nil
}

// decodeReplayRule reads and validates a POST or PUT body; pathName is the
// name in the path for PUT.
func (s *Server) decodeReplayRule(c echo.Context, pathName string) (*records.ReplayRule, error) {
	raw, err := readBody(c, false)
	if err != nil {
		return nil, err
	}
	var b replayRuleBody
	if err := decodeStrict(raw, &b); err != nil {
		return nil, err
	}
	if pathName != "" {
		if b.Name != "" && b.Name != pathName {
			return nil, invalidParam("name", fmt.Sprintf("%q differs from the name in the path %q", b.Name, pathName))
		}
		b.Name = pathName
	}
	switch {
	case strings.TrimSpace(b.Name) == "":
		return nil, invalidParam("name", "required")
	case len(b.Name) > 200:
		return nil, invalidParam("name", "longer than 200 characters")
	case len(b.Filter) == 0 || string(b.Filter) == "null":
		return nil, invalidParam("filter", "required: an object such as {\"error_type\": \"ConnectionError\"} ({} matches every dead letter)")
	case b.Delay == nil:
		return nil, invalidParam("delay", "required: an ISO 8601 duration such as PT1H")
	case b.MaxReplays == nil:
		return nil, invalidParam("max_replays", "required: an integer >= 1")
	case *b.MaxReplays < 1:
		return nil, invalidParam("max_replays", fmt.Sprintf("must be >= 1, got %d (set enabled: false to turn a rule off)", *b.MaxReplays))
	case b.RateLimit != nil && !(*b.RateLimit == 0 || *b.RateLimit >= policy.MinRateLimit && !math.IsInf(*b.RateLimit, 1)):
		return nil, invalidParam("rate_limit", fmt.Sprintf("must be 0 (unlimited) or at least %v replays per second, got %v", policy.MinRateLimit, *b.RateLimit))
	}
	f, err := filter.ParseJSON(b.Filter, filter.Rule, "filter")
	if err != nil {
		return nil, err
	}
	delay, err := policy.ParseDuration(*b.Delay)
	if err != nil || delay < 0 {
		return nil, invalidParam("delay", fmt.Sprintf("%q is not an ISO 8601 duration (e.g. PT1H, P1D)", *b.Delay))
	}
	r := &records.ReplayRule{Name: b.Name, Delay: delay, MaxReplays: *b.MaxReplays, Enabled: true, TimeZone: "UTC"}
	r.Filter = f.Canonical()
	if b.Enabled != nil {
		r.Enabled = *b.Enabled
	}
	if b.RateLimit != nil {
		r.RateLimit = *b.RateLimit
	}
	if w := b.Window; w != nil {
		if w.TimeZone != "" {
			r.TimeZone = w.TimeZone
		}
		if _, err := policy.ParseWindow(w.Start, w.End, r.TimeZone); err != nil {
			field, msg, _ := strings.Cut(err.Error(), ": ")
			return nil, invalidParam(field, msg)
		}
		r.WindowStart, r.WindowEnd = w.Start, w.End
	}
	return r, nil
}

func storedRuleJSON(r *records.ReplayRule) replayRuleJSON {
	out := replayRuleJSON{Name: r.Name, Delay: policy.Duration(r.Delay), MaxReplays: r.MaxReplays, Enabled: r.Enabled,
		RateLimit: r.RateLimit, Source: maintenance.SourceAPI, CreatedAt: &r.CreatedAt, UpdatedAt: &r.UpdatedAt}
	out.Filter = r.Filter
	if r.WindowStart != "" {
		out.Window = &windowJSON{Start: r.WindowStart, End: r.WindowEnd, TimeZone: r.TimeZone}
	}
	return out
}

func policyRuleJSON(r maintenance.Rule) replayRuleJSON {
	return replayRuleJSON{Name: r.Name, Filter: r.Filter.Canonical(), Delay: policy.Duration(r.Delay), MaxReplays: r.MaxReplays,
		Enabled: r.Enabled, Source: maintenance.SourcePolicy, Queues: r.Queues}
}
