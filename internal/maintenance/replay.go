package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

// Rule sources.
const (
	SourcePolicy = "policy"
	SourceAPI    = "api"
)

// Rule is a replay rule as the engine runs it (OJS dead-letter spec §7.1, plus
// a rate limit and a daily window): a rule of the policy files, or one of the
// API's (whose WindowSpec is nil), with where it comes from.
type Rule struct {
	policy.ReplayRule
	// Source is SourcePolicy or SourceAPI.
	Source string
	// Queues are the queues a policy rule applies to (those whose effective
	// policy has it); nil for API rules, which apply to every queue not draining.
	Queues []string
}

// RuleFromStore converts an API rule, reading its stored filter back.
func RuleFromStore(r *store.ReplayRule) (Rule, error) {
	f, err := filter.ParseJSON(r.Filter, filter.Rule, "filter")
	if err != nil {
		return Rule{}, err
	}
	w, err := policy.ParseWindow(r.WindowStart, r.WindowEnd, r.TimeZone)
	if err != nil {
		return Rule{}, err
	}
	return Rule{ReplayRule: policy.ReplayRule{Name: r.Name, Filter: f, Delay: r.Delay, MaxReplays: r.MaxReplays,
		Enabled: r.Enabled, RateLimit: r.RateLimit, Window: w}, Source: SourceAPI}, nil
}

// ReplayerConfig configures a Replayer. Zero fields take the defaults noted.
type ReplayerConfig struct {
	// Deps: Policy gives each queue's replay rules and state, Events
	// receives dead_letter.replayed, Metrics counts replays, and the Clock
	// is the time delays and windows are measured at.
	Deps
	// Interval between passes. Default 30 s.
	Interval time.Duration
	// BatchSize is the most records one rule replays per pass. Default 500.
	BatchSize int
	// Records carries out each replay (it leaves the records of Redrive's
	// own topics and Kafka's internal ones alone, as every retry of many
	// records does: they have no topic to go back to). Default: a
	// records.Service over Store that reserves only Kafka's internal topics.
	Records *records.Service
	// Wake asks the redelivery scheduler to pick replayed records up now. Optional.
	Wake func()
}

func (c ReplayerConfig) withDefaults() ReplayerConfig {
	c.Deps = c.Deps.withDefaults()
	c.Interval = positiveOr(c.Interval, 30*time.Second)
	c.BatchSize = positiveOr(c.BatchSize, 500)
	if c.Wake == nil {
		c.Wake = func() {}
	}
	return c
}

// Replayer evaluates replay rules from the policy files and the API: each
// pass, every enabled rule replays the dead letters it matches that were
// discarded at least Delay ago and that it replayed fewer than MaxReplays
// times, within its window and rate limit. Topics that are draining get no
// replays. A pass runs on one replica at a time, and each replay is one
// statement over SKIP LOCKED rows, so no record is ever replayed twice. It
// is a service.Service: Start runs a pass every Interval and at each Trigger.
type Replayer struct {
	service.Base
	cfg ReplayerConfig
	log *slog.Logger

	mu      sync.Mutex
	lastRun map[string]time.Time // per rule (and queue), for rate limits
	warned  map[string]bool      // broken rules already logged
	trigger service.Wake
}

// NewReplayer returns a Replayer; Start it, or call RunOnce.
func NewReplayer(cfg ReplayerConfig) (*Replayer, error) {
	if cfg.Store == nil {
		return nil, errors.New("replayer: Store is required")
	}
	cfg = cfg.withDefaults()
	if cfg.Records == nil {
		var err error
		if cfg.Records, err = records.New(records.Config{Store: cfg.Store, Logger: cfg.Logger}); err != nil {
			return nil, err
		}
	}
	return &Replayer{cfg: cfg, log: cfg.Logger.With("component", "replay"), lastRun: map[string]time.Time{}, warned: map[string]bool{},
		trigger: service.NewWake()}, nil
}

// Trigger asks for a pass now (after a rule changed).
func (r *Replayer) Trigger() {
	r.trigger.Signal()
}

// Name implements service.Service.
func (r *Replayer) Name() string { return "replay" }

// Start evaluates the rules at once, then every Interval and at each
// Trigger, until ctx ends or Stop.
func (r *Replayer) Start(ctx context.Context) error {
	loop := &service.Loop{Clock: r.cfg.Clock, Logger: r.log, What: "replay rules", Severe: true,
		Interval: r.cfg.Interval, Wake: r.trigger, Pass: func(ctx context.Context) (service.Next, error) {
			_, err := r.RunOnce(ctx)
			return service.Next{}, err
		}}
	return r.Go(ctx, loop.Run)
}

// Rules returns every replay rule: the policy files' (with the queues each
// applies to, among queues that have dead letters) and the API's.
func (r *Replayer) Rules(ctx context.Context) ([]Rule, error) {
	rules, _, err := r.rules(ctx)
	return rules, err
}

// PolicyRuleNames lists the names of the replay rules the policy files give
// the queues that have terminal records (the API refuses those names).
func (r *Replayer) PolicyRuleNames(ctx context.Context) (map[string]bool, error) {
	rules, _, err := r.rules(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, rule := range rules {
		if rule.Source == SourcePolicy {
			names[rule.Name] = true
		}
	}
	return names, nil
}

func (r *Replayer) rules(ctx context.Context) (rules []Rule, draining []string, err error) {
	queues, err := r.cfg.Store.TerminalQueues(ctx)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]int{}
	for _, q := range queues {
		t := r.cfg.Policy(q)
		if t.State == policy.TopicDraining {
			draining = append(draining, q)
			continue
		}
		for _, pr := range t.ReplayRules {
			key := fmt.Sprintf("%s\x00%t\x00%d\x00%d\x00%s\x00%v\x00%v", pr.Name, pr.Enabled, pr.Delay, pr.MaxReplays, pr.Filter.Canonical(),
				pr.RateLimit, pr.WindowSpec)
			if i, ok := byName[key]; ok {
				rules[i].Queues = append(rules[i].Queues, q)
				continue
			}
			byName[key] = len(rules)
			rules = append(rules, Rule{ReplayRule: pr, Source: SourcePolicy, Queues: []string{q}})
		}
	}
	stored, err := r.cfg.Store.ListReplayRules(ctx)
	if err != nil {
		return nil, nil, err
	}
	for i := range stored {
		rule, err := RuleFromStore(&stored[i])
		if err != nil {
			r.warnOnce("replay rule from API skipped", stored[i].Name, "", err)
			continue
		}
		rules = append(rules, rule)
	}
	return rules, draining, nil
}

// ReplayResult is the outcome of one pass.
type ReplayResult struct {
	// Leader is false when another replica was running a pass; nothing was done.
	Leader bool
	// Replayed lists the records replayed, with the rule that replayed them.
	Replayed []ReplayedRecord
}

// ReplayedRecord is one replay.
type ReplayedRecord struct {
	store.Replayed
	Rule string
}

// RunOnce runs one pass of every enabled rule, unless another replica is.
func (r *Replayer) RunOnce(ctx context.Context) (*ReplayResult, error) {
	res := &ReplayResult{}
	leader, err := asLeader(ctx, r.cfg.Store, lockReplay, r.cfg.Metrics.ReplayRuns, func(db *store.Maint) error {
		res.Leader = true
		err := r.replay(ctx, db, res)
		if len(res.Replayed) > 0 {
			r.cfg.Wake()
			r.report(ctx, res.Replayed)
		}
		return err
	})
	if err != nil && !leader {
		return nil, err
	}
	return res, err
}

// replay runs a pass on db, the connection holding the replay lock.
func (r *Replayer) replay(ctx context.Context, db *store.Maint, res *ReplayResult) error {
	rules, draining, err := r.rules(ctx)
	if err != nil {
		return err
	}
	now := r.cfg.Clock.Now()
	var errs []error
	for _, rule := range rules {
		if !rule.Enabled || !rule.Window.Contains(now) {
			continue
		}
		queues := rule.Queues
		if rule.Source == SourceAPI {
			queues = []string{""}
		}
		for _, q := range queues {
			limit := r.allowance(rule, q, now)
			if limit == 0 {
				continue
			}
			done, err := r.cfg.Records.Replay(ctx, db, &records.ReplayParams{
				Rule: rule.Name, Filter: rule.Filter, Queue: q, ExcludeQueues: draining,
				DiscardedBefore: now.Add(-rule.Delay), MaxReplays: rule.MaxReplays, Limit: limit, Now: now,
			})
			for _, d := range done {
				res.Replayed = append(res.Replayed, ReplayedRecord{Replayed: d, Rule: rule.Name})
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// allowance is how many records rule may replay for queue now: BatchSize, or
// what its rate limit allows since its last pass.
func (r *Replayer) allowance(rule Rule, queue string, now time.Time) int {
	if rule.RateLimit <= 0 {
		return r.cfg.BatchSize
	}
	key := rule.Name + "\x00" + queue
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.lastRun[key]
	elapsed := r.cfg.Interval
	if ok {
		elapsed = min(now.Sub(last), r.cfg.Interval)
	}
	n := min(int(rule.RateLimit*elapsed.Seconds()), r.cfg.BatchSize)
	if n >= 1 {
		r.lastRun[key] = now
	}
	return max(n, 0)
}

func (r *Replayer) report(ctx context.Context, done []ReplayedRecord) {
	evs := make([]events.Event, len(done))
	for i, d := range done {
		r.cfg.Metrics.ReplayedTotal.WithLabelValues(d.Queue, d.Rule).Inc()
		evs[i] = records.ReplayedEvent(&done[i].Replayed, d.Rule)
	}
	r.cfg.Events.Publish(ctx, evs...)
	r.log.Info("replayed", "records", len(done))
}

// warnOnce logs a broken rule once, not every pass.
func (r *Replayer) warnOnce(msg, rule, queue string, err error) {
	key := rule + "\x00" + queue + "\x00" + err.Error()
	r.mu.Lock()
	seen := r.warned[key]
	r.warned[key] = true
	r.mu.Unlock()
	if !seen {
		r.log.Error(msg, "rule", rule, "queue", queue, "err", err)
	}
}
