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
	return collect(ctx, s.pool, "list queue configs", scanQueue, "SELECT "+queueColumns+" FROM redrive_queue ORDER BY name")
}

// QueueConfig returns one topic configuration, or ErrNotFound.
func (s *Store) QueueConfig(ctx context.Context, name string) (*QueueConfig, error) {
	return collectOne(ctx, s.pool, "get queue config "+name, scanQueue, "SELECT "+queueColumns+" FROM redrive_queue WHERE name = $1", name)
}

// CreateQueue stores a new explicit topic configuration, or ErrExists.
func (s *Store) CreateQueue(ctx context.Context, name string, config json.RawMessage) (*QueueConfig, error) {
	q, err := collectOne(ctx, s.pool, "create queue "+name, scanQueue, `INSERT INTO redrive_queue (name, config, explicit)
		VALUES ($1, $2, true) ON CONFLICT (name) DO NOTHING RETURNING `+queueColumns, name, config)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrExists
	}
	return q, err
}

// PutQueueConfig replaces (or creates) a topic configuration. With merge, the
// JSON object config is merged into the stored one at the top level instead
// (how pause and resume set only the state).
func (s *Store) PutQueueConfig(ctx context.Context, name string, config json.RawMessage, merge bool) (*QueueConfig, error) {
	set := "config = excluded.config"
	if merge {
		set = "config = redrive_queue.config || excluded.config"
	}
	return collectOne(ctx, s.pool, "put queue config "+name, scanQueue, `INSERT INTO redrive_queue (name, config, explicit)
		VALUES ($1, $2, false) ON CONFLICT (name) DO UPDATE SET `+set+`, updated_at = now() RETURNING `+queueColumns, name, config)
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
