package store

import (
	"context"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// The encoder's column lists and types, for TestRecordOIDsMatchTheTables.
var (
	DataColumns      = dataColumns
	DataOIDs         = dataOIDs
	LifecycleColumns = lifecycleColumns
	LifecycleOIDs    = lifecycleOIDs
)

// EncodeRows encodes the three tables' COPY streams of records, as
// InsertRecords sends them, and says how many bytes they hold (for
// BenchmarkEncode).
func EncodeRows(records []dlq.Record) (int64, error) {
	enc := newEncoder()
	var n int64
	for _, table := range []copyTable{coordTable, lifecycleTable, dataTable} {
		m, err := io.Copy(io.Discard, newRowReader(enc, records, nil, table, asJSONUnchecked))
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// QueueActivitySQL is QueueActivity's statement, for its EXPLAIN.
const QueueActivitySQL = queueActivitySQL

// ListScans renders the statements a listing runs (one per segment it
// reads), for their EXPLAINs.
func ListScans(p *ListParams) []struct {
	SQL  string
	Args []any
} {
	var out []struct {
		SQL  string
		Args []any
	}
	for _, i := range p.scans() {
		q, args := p.scanQuery(i, previewColumns, p.Limit+1)
		out = append(out, struct {
			SQL  string
			Args []any
		}{q, []any{args}})
	}
	return out
}

// PayloadMatchCap is how many matches a payload search looks up first.
const PayloadMatchCap = payloadMatchCap

// SettleSQL and RescueSQL are Settle's and RescueExpired's statements, for
// their EXPLAIN.
var SettleSQL, RescueSQL = settleSQL, rescueSQL

// ClaimSQL and ClaimAfterSQL are ClaimDue's statements (from the start of
// the due records, and from a place in due order).
var ClaimSQL, ClaimAfterSQL = claimSQL, claimAfterSQL

// EndClaimSQL is Settle's statement when nothing failed.
const EndClaimSQL = endClaimSQL

// CountScan is the statement countFor runs for a filter the count table
// cannot answer, for its EXPLAIN.
func CountScan(f *filter.Filter) (string, []any) {
	args := pgx.NamedArgs{"count_cap": countCap + 1}
	return countScanSQL(recordsFrom(f, nil), where(f, nil, "", args)), []any{args}
}

// Setting is a setting of a session of the store's pool, for Open's tests.
func (s *Store) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// KeptClaimMemory says how many blocks of keys and values and how many
// record slices s keeps from released claims.
func KeptClaimMemory(s *Store) (blocks, slices int) {
	return s.mem.blocks.Len(), s.mem.slices.Len()
}
