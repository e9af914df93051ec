package store

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err means Postgres could not be reached or went
// away mid-statement (connection refused or reset, server shutting down or
// starting up), as opposed to a statement Postgres refused. Callers wait and
// try again on such errors instead of giving up on work that will succeed
// once the server is back.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01–57P03: admin or crash
		// shutdown, cannot connect now (starting up or recovering).
		return pgErr.Code[:2] == "08" || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}

// Contended reports whether err means Postgres rolled a transaction back
// for another's sake (a deadlock it broke, a serialization failure, a lock
// not granted in time): nothing was wrong with the statement, and running
// the transaction again is expected to succeed.
func Contended(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001" || pgErr.Code == "55P03")
}

// contendedAttempts is how many times a single-record write runs when
// Postgres rolls it back for another's sake (Contended): a deadlock broken
// at a week's turn, when the partition maintenance, ingest and the
// fingerprint pass all lock the record tables, must not answer an
// operator's delete or retry with 503.
const contendedAttempts = 3

// retryContended runs f, again after a short pause while it fails
// Contended, up to contendedAttempts times in all.
func retryContended(ctx context.Context, f func() error) error {
	var err error
	for attempt := 1; attempt <= contendedAttempts; attempt++ {
		if err = f(); !Contended(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
	return err
}
