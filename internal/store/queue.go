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

func queueOf(r dbsqlc.RedriveQueue) *QueueConfig {
	return &QueueConfig{Name: r.Name, Config: r.Config, Explicit: r.Explicit, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// oneQueue is the configuration a statement read, or ErrNotFound.
func oneQueue(what string, r dbsqlc.RedriveQueue, err error) (*QueueConfig, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return queueOf(r), nil
}

// QueueConfigs returns every topic configuration set through the API.
func (s *Store) QueueConfigs(ctx context.Context) ([]QueueConfig, error) {
	rows, err := s.q.QueueConfigList(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("list queue configs: %w", err)
	}
	out := make([]QueueConfig, len(rows))
	for i, r := range rows {
		out[i] = *queueOf(r)
	}
	return out, nil
}

// QueueConfig returns one topic configuration, or ErrNotFound.
func (s *Store) QueueConfig(ctx context.Context, name string) (*QueueConfig, error) {
	r, err := s.q.QueueConfigGet(ctx, s.pool, name)
	return oneQueue("get queue config "+name, r, err)
}

// CreateQueue stores a new explicit topic configuration, or ErrExists.
func (s *Store) CreateQueue(ctx context.Context, name string, config json.RawMessage) (*QueueConfig, error) {
	r, err := s.q.QueueCreate(ctx, s.pool, name, config)
	q, err := oneQueue("create queue "+name, r, err)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrExists
	}
	return q, err
}

// PutQueueConfig replaces (or creates) a topic configuration. With merge, the
// JSON object config is merged into the stored one at the top level instead
// (how pause and resume set only the state).
func (s *Store) PutQueueConfig(ctx context.Context, name string, config json.RawMessage, merge bool) (*QueueConfig, error) {
	put := s.q.QueueConfigPut
	if merge {
		put = s.q.QueueConfigMerge
	}
	r, err := put(ctx, s.pool, name, config)
	return oneQueue("put queue config "+name, r, err)
}

// DeleteQueue removes a topic configuration, or returns ErrNotFound.
func (s *Store) DeleteQueue(ctx context.Context, name string) error {
	n, err := s.q.QueueDelete(ctx, s.pool, name)
	if err != nil {
		return fmt.Errorf("delete queue %s: %w", name, err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
