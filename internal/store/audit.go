package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// AuditEntry is one state-changing API call.
type AuditEntry struct {
	ID        int64
	At        time.Time
	KeyName   string
	Action    string
	Method    string
	Path      string
	Target    string
	Filter    json.RawMessage // nil when the call had none
	Count     *int64          // records affected (or that would be), when known
	Status    int
	RequestID string
	// Before and After are what a configuration change changed (a topic's
	// API config, a replay rule) before and after the call; nil where there
	// was none (created, deleted) and for other calls.
	Before, After json.RawMessage
	// ActorKind is the kind of caller (key, oidc, anonymous; "" before
	// it was recorded); ActorSubject and ActorEmail the token's subject
	// and email of a person signed in through the identity provider.
	ActorKind                string
	ActorSubject, ActorEmail *string
}

// AddAudit appends an entry to the audit log.
func (s *Store) AddAudit(ctx context.Context, e *AuditEntry) error {
	// jsonb cannot hold NUL; a refused call's filter is still logged.
	filter, before, after := auditJSON(e.Filter), auditJSON(e.Before), auditJSON(e.After)
	// Refused calls are logged too, whatever bytes they carried: text
	// columns get valid UTF-8 without NUL.
	err := s.q.AuditAdd(ctx, s.pool, dbsqlc.AuditAddParams{KeyName: clean(e.KeyName), Action: e.Action, Method: e.Method,
		Path: clean(e.Path), Target: clean(e.Target), Filter: filter, Count: e.Count, Status: int32(e.Status),
		RequestID: clean(e.RequestID), Before: before, After: after, ActorKind: e.ActorKind,
		ActorSubject: cleanPtr(e.ActorSubject), ActorEmail: cleanPtr(e.ActorEmail)})
	if err != nil {
		return fmt.Errorf("write audit log: %w", err)
	}
	return nil
}

func cleanPtr(s *string) *string {
	if s == nil {
		return nil
	}
	v := clean(*s)
	return &v
}

// auditJSON is JSON for a jsonb column of the audit log: NULL when empty,
// NUL escapes replaced.
func auditJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return bytes.ReplaceAll(b, nulEscape, []byte(`\ufffd`))
}

// AuditParams selects audit entries, newest first.
type AuditParams struct {
	KeyName string
	Action  string
	Target  string
	Since   time.Time
	Until   time.Time
	Limit   int
	// BeforeID is the keyset cursor.
	BeforeID int64
}

// Audit returns audit entries newest first, how many match in all, and
// whether more follow.
func (s *Store) Audit(ctx context.Context, p *AuditParams) ([]AuditEntry, int64, bool, error) {
	conds := "TRUE"
	args := pgx.NamedArgs{}
	add := func(name, cond string, v any) {
		args[name] = v
		conds += " AND " + cond
	}
	if p.KeyName != "" {
		add("key_name", "key_name = @key_name", p.KeyName)
	}
	if p.Action != "" {
		add("action", "action = @action", p.Action)
	}
	if p.Target != "" {
		add("target", "target = @target", p.Target)
	}
	if !p.Since.IsZero() {
		add("since", "at >= @since", p.Since)
	}
	if !p.Until.IsZero() {
		add("until", "at < @until", p.Until)
	}
	var total int64
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_audit WHERE "+conds, args).Scan(&total); err != nil {
		return nil, 0, false, fmt.Errorf("count audit log: %w", err)
	}
	if p.BeforeID > 0 {
		add("before_id", "id < @before_id", p.BeforeID)
	}
	args["limit"] = p.Limit + 1
	rows, err := s.pool.Query(ctx, `SELECT id, at, key_name, action, method, path, target, filter, count, status, request_id, before, after,
		actor_kind, actor_subject, actor_email FROM redrive_audit WHERE `+conds+` ORDER BY id DESC LIMIT @limit`, args)
	if err != nil {
		return nil, 0, false, fmt.Errorf("read audit log: %w", err)
	}
	es, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := row.Scan(&e.ID, &e.At, &e.KeyName, &e.Action, &e.Method, &e.Path, &e.Target, &e.Filter, &e.Count, &e.Status, &e.RequestID, &e.Before, &e.After,
			&e.ActorKind, &e.ActorSubject, &e.ActorEmail)
		return e, err
	})
	if err != nil {
		return nil, 0, false, fmt.Errorf("read audit log: %w", err)
	}
	if len(es) > p.Limit {
		return es[:p.Limit], total, true, nil
	}
	return es, total, false, nil
}
