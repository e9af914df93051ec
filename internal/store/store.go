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

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is returned when a record does not exist.
var ErrNotFound = errors.New("record not found")

// Store reads and writes dead-letter records.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

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
