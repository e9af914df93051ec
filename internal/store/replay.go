package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/filter"

	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// ErrRuleExists is returned when creating a replay rule whose name is taken.
var ErrRuleExists = errors.New("replay rule already exists")

// ReplayParams selects and replays dead letters for one replay rule.
type ReplayParams struct {
	// Rule is the rule's name, recorded in the record's meta.
	Rule string
	// Filter selects records (State, Exhaustion and Unacknowledged are
	// ignored: a rule only replays dead letters).
	Filter filter.Filter
	// Queue, when set, restricts the rule to one queue (a rule from a topic's
	// policy); it is ANDed with Filter.Queue.
	Queue string
	// ExcludeQueues are skipped (draining topics).
	ExcludeQueues []string
	// DiscardedBefore: only records discarded at or before it (now - delay).
	DiscardedBefore time.Time
	// MaxReplays: only records this rule replayed fewer times.
	MaxReplays int
	// Limit is the most records replayed (> 0).
	Limit int
	// Now is the time of the replay.
	Now time.Time
}

// Replayed is one record a replay rule sent back.
type Replayed struct {
	ID          string
	Queue       string
	Type        string
	ErrorType   string
	ReplayCount int
	// KeyPrefix and KeySize are as in BatchRow.
	KeyPrefix []byte
	KeySize   int
}

// Replay sends matching dead letters back for redelivery in one statement:
// state available, attempt 0, next_retry_at and enqueued_at now, exhaustion
// and discarded_at cleared, error history and id kept (OJS dead-letter spec
// §6.1), and the replay tracked in meta (§7.2): ojs.replay_count,
// ojs.last_replayed_at, ojs.replay_rule, plus redrive.replays, the count per
// rule that max_replays is checked against.
//
// Selection and update are one statement over rows locked FOR UPDATE SKIP
// LOCKED; a row another replica is replaying is skipped, and one it has
// replayed no longer matches (it is not discarded any more), so two replicas
// never replay the same record twice.
//
// sc narrows p.Filter (its States and InFlight are ignored, as Filter's State).
func (s *Store) Replay(ctx context.Context, sc filter.Scope, p *ReplayParams) ([]Replayed, error) {
	return s.Maint().Replay(ctx, sc, p)
}

// Replay is Store.Replay on m's connection.
func (m *Maint) Replay(ctx context.Context, sc filter.Scope, p *ReplayParams) ([]Replayed, error) {
	if p.Limit <= 0 {
		return nil, errors.New("replay: limit must be > 0")
	}
	f := p.Filter
	f.State, f.Exhaustion, f.Unacknowledged, sc.States, sc.InFlight = "", "", nil, nil, nil
	args := pgx.NamedArgs{"rule": p.Rule, "available_at": p.Now, "replayed_at": p.Now.UTC().Format(time.RFC3339Nano),
		"discarded_before": p.DiscardedBefore, "max_replays": p.MaxReplays, "limit": p.Limit}
	cond := where(&f, &sc, "f_", args) + " AND discarded_at <= @discarded_before AND " + ruleReplays + " < @max_replays"
	if p.Queue != "" {
		args["rule_queue"] = p.Queue
		cond += " AND queue = @rule_queue"
	}
	if len(p.ExcludeQueues) > 0 {
		args["exclude_queues"] = p.ExcludeQueues
		cond += " AND queue <> ALL(@exclude_queues)"
	}
	q := `
		WITH picked AS (
			SELECT id FROM redrive_record
			WHERE state = 'discarded' AND exhaustion = 'dead_letter' AND ` + cond + `
			ORDER BY discarded_at LIMIT @limit
			FOR UPDATE SKIP LOCKED
		),
		l AS (UPDATE redrive_lifecycle SET ` + makeAvailable + ` FROM picked WHERE redrive_lifecycle.id = picked.id
			RETURNING redrive_lifecycle.id)
		UPDATE redrive_record_data r SET
			meta = r.meta || jsonb_build_object(
				'ojs.replay_count', ` + replayCount + ` + 1,
				'ojs.last_replayed_at', @replayed_at::text,
				'ojs.replay_rule', @rule::text,
				'redrive.replays', CASE WHEN jsonb_typeof(r.meta->'redrive.replays') = 'object'
				                        THEN r.meta->'redrive.replays' ELSE '{}'::jsonb END
				                   || jsonb_build_object(@rule::text, ` + ruleReplays + ` + 1))
		FROM l WHERE r.id = l.id
		RETURNING r.id, r.queue, r.type, r.error_type, (r.meta->>'ojs.replay_count')::int,
			substring(r.key from 1 for ` + strconv.Itoa(BatchKeyBytes) + `), coalesce(octet_length(r.key), -1)`
	rows, err := m.db.Query(ctx, q, args)
	if err != nil {
		return nil, fmt.Errorf("replay rule %s: %w", p.Rule, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Replayed, error) {
		var r Replayed
		err := row.Scan(&r.ID, &r.Queue, &r.Type, &r.ErrorType, &r.ReplayCount, &r.KeyPrefix, &r.KeySize)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("replay rule %s: %w", p.Rule, err)
	}
	return out, nil
}

// replayCount is how often the record's meta says it was replayed; ruleReplays
// how often rule @rule replayed it. Each reads a JSON number as an integer, 0
// when it is missing or not a number (meta is user-editable). The columns are
// unqualified: both read the meta of the one record a statement looks at.
const (
	replayCount = `(CASE WHEN jsonb_typeof(meta->'ojs.replay_count') = 'number'
		THEN floor((meta->'ojs.replay_count')::numeric)::int ELSE 0 END)`
	ruleReplays = `(CASE WHEN jsonb_typeof(meta->'redrive.replays'->(@rule::text)) = 'number'
		THEN floor((meta->'redrive.replays'->(@rule::text))::numeric)::int ELSE 0 END)`
)

// ReplayRule is a replay rule created through the API.
type ReplayRule struct {
	Name       string
	Filter     json.RawMessage
	Delay      time.Duration
	MaxReplays int
	Enabled    bool
	// RateLimit is the most replays per second; 0 is unlimited.
	RateLimit float64
	// WindowStart and WindowEnd ("HH:MM") bound the time of day replays run;
	// both empty: any time.
	WindowStart, WindowEnd string
	TimeZone               string
	CreatedAt, UpdatedAt   time.Time
}

func replayRuleOf(r dbsqlc.RedriveReplayRule) ReplayRule {
	out := ReplayRule{Name: r.Name, Filter: r.Filter, Delay: time.Duration(r.DelayMs) * time.Millisecond,
		MaxReplays: int(r.MaxReplays), Enabled: r.Enabled, RateLimit: r.RateLimit, TimeZone: r.TimeZone,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.WindowStart != nil {
		out.WindowStart = *r.WindowStart
	}
	if r.WindowEnd != nil {
		out.WindowEnd = *r.WindowEnd
	}
	return out
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ListReplayRules returns the API's replay rules by name.
func (s *Store) ListReplayRules(ctx context.Context) ([]ReplayRule, error) {
	rows, err := s.q.ReplayRuleList(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("list replay rules: %w", err)
	}
	out := make([]ReplayRule, len(rows))
	for i, r := range rows {
		out[i] = replayRuleOf(r)
	}
	return out, nil
}

// GetReplayRule returns one rule, or ErrNotFound.
func (s *Store) GetReplayRule(ctx context.Context, name string) (*ReplayRule, error) {
	r, err := s.q.ReplayRuleGet(ctx, s.pool, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get replay rule %s: %w", name, err)
	}
	out := replayRuleOf(r)
	return &out, nil
}

// CreateReplayRule stores a new rule; ErrRuleExists when the name is taken.
func (s *Store) CreateReplayRule(ctx context.Context, r *ReplayRule) error {
	err := s.q.ReplayRuleCreate(ctx, s.pool, dbsqlc.ReplayRuleCreateParams{Name: r.Name, Filter: r.Filter,
		DelayMs: r.Delay.Milliseconds(), MaxReplays: int32(r.MaxReplays), Enabled: r.Enabled, RateLimit: r.RateLimit,
		WindowStart: nullString(r.WindowStart), WindowEnd: nullString(r.WindowEnd), TimeZone: r.TimeZone, CreatedAt: r.CreatedAt})
	if isUniqueViolation(err) {
		return ErrRuleExists
	}
	if err != nil {
		return fmt.Errorf("create replay rule %s: %w", r.Name, err)
	}
	return nil
}

// UpdateReplayRule replaces a rule's settings (not its name or created_at);
// ErrNotFound when there is none.
func (s *Store) UpdateReplayRule(ctx context.Context, r *ReplayRule) error {
	n, err := s.q.ReplayRuleUpdate(ctx, s.pool, dbsqlc.ReplayRuleUpdateParams{Name: r.Name, Filter: r.Filter,
		DelayMs: r.Delay.Milliseconds(), MaxReplays: int32(r.MaxReplays), Enabled: r.Enabled, RateLimit: r.RateLimit,
		WindowStart: nullString(r.WindowStart), WindowEnd: nullString(r.WindowEnd), TimeZone: r.TimeZone, UpdatedAt: r.UpdatedAt})
	if err != nil {
		return fmt.Errorf("update replay rule %s: %w", r.Name, err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// DeleteReplayRule removes a rule; ErrNotFound when there is none.
func (s *Store) DeleteReplayRule(ctx context.Context, name string) error {
	n, err := s.q.ReplayRuleDelete(ctx, s.pool, name)
	if err != nil {
		return fmt.Errorf("delete replay rule %s: %w", name, err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
