package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// QuietRequest is an incident marked "resolved, redrive when quiet": once
// no failure of it has arrived for Quiet — counted from the later of the
// request and its latest failure — a canary retry of its records starts,
// created by RequestedBy.
type QuietRequest struct {
	Incident    string
	Quiet       time.Duration
	Canary      CanarySpec // SampleSize 0: computed when the task is made
	RateLimit   float64
	RequestedBy string
	RequestedAt time.Time
	// QuietSince is when the quiet began: the later of RequestedAt and the
	// arrival of the incident's latest failure (reads only).
	QuietSince time.Time
	// TaskID is the task it started, StartedAt when; nil while it waits.
	TaskID    *string
	StartedAt time.Time
}

// QuietUntil is when the request starts its retry if nothing arrives before.
func (q *QuietRequest) QuietUntil() time.Time { return q.QuietSince.Add(q.Quiet) }

func quietOf(fp string, quietMs int64, canary json.RawMessage, rate float64, by string, at time.Time, task *string,
	started *time.Time, since time.Time) (*QuietRequest, error) {
	q := &QuietRequest{Incident: fp, Quiet: time.Duration(quietMs) * time.Millisecond, RateLimit: rate, RequestedBy: by,
		RequestedAt: at, TaskID: task, QuietSince: since}
	if started != nil {
		q.StartedAt = *started
	}
	if err := json.Unmarshal(canary, &q.Canary); err != nil {
		return nil, fmt.Errorf("decode the canary of incident %s's quiet request: %w", fp, err)
	}
	return q, nil
}

// SetQuietRequest stores an incident's request, replacing the one it had
// (waiting or started). ErrNotFound: no such incident.
func (s *Store) SetQuietRequest(ctx context.Context, q *QuietRequest) (*QuietRequest, error) {
	canary, err := json.Marshal(&q.Canary)
	if err != nil {
		return nil, fmt.Errorf("encode canary: %w", err)
	}
	if _, err := s.GetIncident(ctx, &IncidentParams{ID: q.Incident}); err != nil {
		return nil, err
	}
	if _, err := s.q.QuietRequestSet(ctx, s.pool, dbsqlc.QuietRequestSetParams{Fingerprint: q.Incident,
		QuietMs: q.Quiet.Milliseconds(), Canary: canary, RateLimit: q.RateLimit, RequestedBy: q.RequestedBy,
		RequestedAt: q.RequestedAt}); err != nil {
		return nil, fmt.Errorf("mark incident %s to redrive when quiet: %w", q.Incident, err)
	}
	return s.QuietRequestOf(ctx, q.Incident)
}

// QuietRequestOf returns an incident's request, or ErrNotFound.
func (s *Store) QuietRequestOf(ctx context.Context, incident string) (*QuietRequest, error) {
	r, err := s.q.QuietRequestGet(ctx, s.pool, incident)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read incident %s's quiet request: %w", incident, err)
	}
	return quietOf(r.Fingerprint, r.QuietMs, r.Canary, r.RateLimit, r.RequestedBy, r.RequestedAt, r.TaskID, r.StartedAt, r.QuietSince)
}

// DeleteQuietRequest withdraws an incident's waiting request: ErrNotFound
// when it has none waiting (none at all, or its retry started already).
func (s *Store) DeleteQuietRequest(ctx context.Context, incident string) error {
	_, err := s.q.QuietRequestDelete(ctx, s.pool, incident)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("withdraw incident %s's quiet request: %w", incident, err)
	}
	return nil
}

// QuietDue returns up to limit waiting requests whose quiet has lasted
// long enough at now, oldest request first.
func (s *Store) QuietDue(ctx context.Context, now time.Time, limit int) ([]QuietRequest, error) {
	rows, err := s.q.QuietDue(ctx, s.pool, now, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("quiet incidents: %w", err)
	}
	out := make([]QuietRequest, 0, len(rows))
	for _, r := range rows {
		q, err := quietOf(r.Fingerprint, r.QuietMs, r.Canary, r.RateLimit, r.RequestedBy, r.RequestedAt, r.TaskID, r.StartedAt, r.QuietSince)
		if err != nil {
			return nil, err
		}
		out = append(out, *q)
	}
	return out, nil
}
