package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrExists is returned when creating something that already exists.
var ErrExists = errors.New("already exists")

// QueueConfig is a topic configuration set through the API: a partial topic
// policy (policy.TopicSpec as JSON) layered over the policy files.
type QueueConfig struct {
	Name string
	// Config is the partial policy, as JSON.
	Config json.RawMessage
	// Explicit is true for topics created with POST /queues.
	Explicit  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

const queueColumns = "name, config, explicit, created_at, updated_at"

func scanQueue(row pgx.CollectableRow) (QueueConfig, error) {
	var q QueueConfig
	err := row.Scan(&q.Name, &q.Config, &q.Explicit, &q.CreatedAt, &q.UpdatedAt)
	return q, err
}

// QueueConfigs returns every topic configuration set through the API.
func (s *Store) QueueConfigs(ctx context.Context) ([]QueueConfig, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+queueColumns+" FROM redrive_queue ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list queue configs: %w", err)
	}
	qs, err := pgx.CollectRows(rows, scanQueue)
	if err != nil {
		return nil, fmt.Errorf("list queue configs: %w", err)
	}
	return qs, nil
}

// QueueConfig returns one topic configuration, or ErrNotFound.
func (s *Store) QueueConfig(ctx context.Context, name string) (*QueueConfig, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+queueColumns+" FROM redrive_queue WHERE name = $1", name)
	if err != nil {
		return nil, fmt.Errorf("get queue config %s: %w", name, err)
	}
	q, err := pgx.CollectExactlyOneRow(rows, scanQueue)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get queue config %s: %w", name, err)
	}
	return &q, nil
}

// CreateQueue stores a new explicit topic configuration, or ErrExists.
func (s *Store) CreateQueue(ctx context.Context, name string, config json.RawMessage) (*QueueConfig, error) {
	rows, err := s.pool.Query(ctx, `INSERT INTO redrive_queue (name, config, explicit) VALUES ($1, $2, true)
		ON CONFLICT (name) DO NOTHING RETURNING `+queueColumns, name, config)
	if err != nil {
		return nil, fmt.Errorf("create queue %s: %w", name, err)
	}
	q, err := pgx.CollectExactlyOneRow(rows, scanQueue)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrExists
	}
	if err != nil {
		return nil, fmt.Errorf("create queue %s: %w", name, err)
	}
	return &q, nil
}

// PutQueueConfig replaces (or creates) a topic configuration. With merge, the
// JSON object config is merged into the stored one at the top level instead
// (how pause and resume set only the state).
func (s *Store) PutQueueConfig(ctx context.Context, name string, config json.RawMessage, merge bool) (*QueueConfig, error) {
	set := "config = excluded.config"
	if merge {
		set = "config = redrive_queue.config || excluded.config"
	}
	rows, err := s.pool.Query(ctx, `INSERT INTO redrive_queue (name, config, explicit) VALUES ($1, $2, false)
		ON CONFLICT (name) DO UPDATE SET `+set+`, updated_at = now() RETURNING `+queueColumns, name, config)
	if err != nil {
		return nil, fmt.Errorf("put queue config %s: %w", name, err)
	}
	q, err := pgx.CollectExactlyOneRow(rows, scanQueue)
	if err != nil {
		return nil, fmt.Errorf("put queue config %s: %w", name, err)
	}
	return &q, nil
}

// DeleteQueue removes a topic configuration, or returns ErrNotFound.
func (s *Store) DeleteQueue(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM redrive_queue WHERE name = $1", name)
	if err != nil {
		return fmt.Errorf("delete queue %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
