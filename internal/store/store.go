// Package store keeps dead-letter records in Postgres (pgx v5): the schema and
// its migrations, idempotent batch ingest, and the queries behind the API.
//
// It owns the SQL and the storage encoding of records; it makes no policy
// decisions and never talks to Kafka.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// ErrNotFound is returned when a record does not exist.
var ErrNotFound = errors.New("record not found")

// Store reads and writes dead-letter records.
type Store struct {
	pool  *pgxpool.Pool
	owned bool // the pool is the Store's (Open): Close closes it
	q     *dbsqlc.Queries
	mem   *claimMemory // what released claims held, for the next claims
}

// New returns a Store on pool, which the caller keeps and closes (tests).
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: dbsqlc.New(), mem: newClaimMemory()}
}

// Open connects to the database at url with a pool of its own, which Close
// closes. A url that does not parse is a *URLError.
func Open(ctx context.Context, url string, opts OpenOptions) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &URLError{Err: err}
	}
	if opts.MinMaxConns > 0 && !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, opts.MinMaxConns)
	}
	jitOff(cfg.ConnConfig.RuntimeParams)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Store{pool: pool, owned: true, q: dbsqlc.New(), mem: newClaimMemory()}, nil
}

// jitOff turns Postgres's JIT compilation off for the pool's sessions,
// unless the url (or PGOPTIONS) sets jit itself. Every statement Redrive
// runs is short, but a join over the weekly partitions can be estimated at
// billions of rows (a claim of 500 records at 3.2e9, cost 1.9M, past
// jit_above_cost's 100,000): JIT then compiled each claim for 2.6 s of its
// 2.8 s, and a bulk retry of a million records crawled at 330 records/s.
func jitOff(params map[string]string) {
	if _, set := params["jit"]; set || strings.Contains(params["options"], "jit") {
		return
	}
	params["jit"] = "off"
}

// OpenOptions adjust the pool Open makes.
type OpenOptions struct {
	// MinMaxConns raises the pool's size to at least this many connections
	// unless the url sets pool_max_conns (0: pgxpool's default).
	MinMaxConns int32
}

// URLError is a database url Open could not parse.
type URLError struct{ Err error }

func (e *URLError) Error() string { return e.Err.Error() }
func (e *URLError) Unwrap() error { return e.Err }

// Close closes the pool of a Store made by Open (a Store made by New leaves
// its pool to the caller).
func (s *Store) Close() {
	if s.owned {
		s.pool.Close()
	}
}

// Migrator returns a Migrator for the store's database. Close it after use.
func (s *Store) Migrator(logger *slog.Logger) (*Migrator, error) { return NewMigrator(s.pool, logger) }

// Tx is a transaction of the store: the statements of the methods that take
// it (RetryBatch, PurgeBatch) commit or roll back together.
type Tx struct{ tx pgx.Tx }

// WithTx runs fn in a transaction, committed when fn returns nil and rolled
// back otherwise.
func (s *Store) WithTx(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(ctx, &Tx{tx: tx}) })
}

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// rowFault reports whether Postgres refused a statement for what a row
// holds, as opposed to being unreachable or unwell: SQLSTATE class 22 (data
// exception: a value jsonb or text cannot take), 23 (integrity constraint
// violation) and 54 (program limit exceeded: an index entry too large, JSON
// nested too deep for the server's stack). Every other error (connection
// failures, 53 insufficient resources, 57 operator intervention, 58 system
// errors, 25 a read-only transaction, 40 rollbacks, XX internal errors, and
// anything else) is about the server or the statement, never a reason to
// change what is written.
func rowFault(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return true
	}
	return false
}

// isUniqueViolation reports whether err is a unique-constraint violation.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
