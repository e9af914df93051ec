package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store/pgcopy"
)

// insertIgnoringDuplicates stores one record (its DLQ coordinates, its
// lifecycle, then its wide row, in the view's lock order; the values of
// rowValues, then of lifecycleValues)
// unless its DLQ record (coordinates and timestamp) is already stored: the
// coordinates table (redrive_record_coord, migration 00211) is what refuses
// it, whatever partition the record's first copy went to.
var insertIgnoringDuplicates = "WITH c AS (INSERT INTO redrive_record_coord (" + strings.Join(coordColumns, ", ") + ") VALUES (" +
	coordPlaceholders() + ") ON CONFLICT DO NOTHING RETURNING 1), " +
	"l AS (INSERT INTO redrive_lifecycle (" + strings.Join(lifecycleColumns, ", ") + ") SELECT " +
	placeholders(len(dataOIDs)+1, lifecycleOIDs) + " FROM c RETURNING 1) " +
	"INSERT INTO redrive_record_data (" + strings.Join(dataColumns, ", ") + ") SELECT " +
	placeholders(1, dataOIDs) + " FROM l"

// insertValues are the values of insertIgnoringDuplicates for r, in mode.
func insertValues(r *dlq.Record, mode jsonMode, reason string) ([]any, error) {
	vals, err := rowValues(r, mode, reason)
	if err != nil {
		return nil, err
	}
	return append(vals, lifecycleValues(r, vals[0].(pgtype.UUID), mode)...), nil
}

// InsertResult says which records of a batch InsertRecords stored.
type InsertResult struct {
	// N is how many records were stored; the others had been stored before.
	N int
	// duplicate marks, by index, the records that were already stored.
	duplicate map[int]bool
	// degraded holds, by index, why a record Postgres refused as it was
	// was stored in a degraded form.
	degraded map[int]string
}

// New reports whether records[i] was stored by this call (not before).
func (r InsertResult) New(i int) bool { return !r.duplicate[i] }

// Degraded says why records[i] was stored in a degraded form (without its
// payload, or in its minimal form) because Postgres refused it as it was;
// "" when it was stored as it was (or not by this call).
func (r InsertResult) Degraded(i int) string { return r.degraded[i] }

func (r *InsertResult) add(i int, stored bool) {
	if stored {
		r.N++
		return
	}
	if r.duplicate == nil {
		r.duplicate = map[int]bool{}
	}
	r.duplicate[i] = true
}

// placeholders is $first, … of a row's values, each cast to its column's
// type (oids).
func placeholders(first int, oids []uint32) string {
	types := pgtype.NewMap()
	ps := make([]string, len(oids))
	for i, oid := range oids {
		t, ok := types.TypeForOID(oid)
		if !ok {
			panic("store: no type for oid " + strconv.Itoa(int(oid)))
		}
		ps[i] = "$" + strconv.Itoa(first+i) + "::" + t.Name
	}
	return strings.Join(ps, ", ")
}

// InsertRecords stores new records and says which were inserted. It is
// idempotent on the records' DLQ identity (coordinates and timestamp): records
// already stored are skipped.
//
// The fast path is a COPY per table, all three sent as one query
// (copyBatch), which is all-or-nothing. Its JSON values are not checked
// here: Postgres checks them as it parses the jsonb. When it fails, what failed decides (see afterCopy): Postgres
// unreachable or unwell is an error, and the caller tries again later; a
// duplicate or a row Postgres refuses for what it holds is dealt with here,
// so that one record never blocks a batch.
func (s *Store) InsertRecords(ctx context.Context, records []dlq.Record) (InsertResult, error) {
	if len(records) == 0 {
		return InsertResult{}, nil
	}
	n, err := s.copyBatch(ctx, records)
	return s.afterCopy(ctx, records, n, err)
}

// copyBatch COPYs records into the three tables in one query (pgcopy): a
// batch costs one round trip to Postgres instead of five (BEGIN, three
// COPYs, COMMIT), and ingest's store stage keeps Postgres busier. It
// returns the rows the last COPY wrote.
func (s *Store) copyBatch(ctx context.Context, records []dlq.Record) (int64, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	enc := encoders.Get().(*encoder)
	defer encoders.Put(enc) // every stream is read by the time InOneQuery returns
	tags, err := pgcopy.InOneQuery(ctx, conn.Conn().PgConn(), copyStreams(enc, records, nil, asJSONUnchecked)...)
	if err != nil {
		return 0, err
	}
	return tags[len(tags)-1].RowsAffected(), nil
}

// encoders are encoders between COPYs, with the buffers they grew (an
// encoder is not safe for concurrent use).
var encoders = sync.Pool{New: func() any { return newEncoder() }}

// copyRecords COPYs records (all of them, or those at idx) into the three
// tables within tx, encoding their rows (mode) as they are sent: their DLQ
// coordinates first (a batch consumed again fails there, on their primary
// key, before any wide row is written), then their lifecycles before their
// wide rows (the view's lock order, which every statement keeps, partition
// DDL included).
func copyRecords(ctx context.Context, tx pgx.Tx, records []dlq.Record, idx []int, mode jsonMode) (int64, error) {
	enc := encoders.Get().(*encoder)
	pg := tx.Conn().PgConn()
	var tag pgconn.CommandTag
	for _, s := range copyStreams(enc, records, idx, mode) {
		var err error
		if tag, err = pg.CopyFrom(ctx, s.Rows, s.SQL); err != nil {
			// Not given back: when the connection broke, its reader may
			// still be encoding.
			return 0, err
		}
	}
	encoders.Put(enc)
	return tag.RowsAffected(), nil
}

// copyStreams are the COPYs of records (all of them, or those at idx), in
// the order copyRecords explains, their rows encoded by enc as they are read.
func copyStreams(enc *encoder, records []dlq.Record, idx []int, mode jsonMode) []pgcopy.Stream {
	return []pgcopy.Stream{
		{SQL: copyCoordSQL, Rows: newRowReader(enc, records, idx, coordTable, mode)},
		{SQL: copyLifecycleSQL, Rows: newRowReader(enc, records, idx, lifecycleTable, mode)},
		{SQL: copyDataSQL, Rows: newRowReader(enc, records, idx, dataTable, mode)},
	}
}

// afterCopy finishes a COPY of records: done when it succeeded. A COPY that
// failed on a duplicate (a batch consumed again after a crash or rebalance
// between the insert and the offset commit) or on a row Postgres refuses
// (rowFault) is written again the slow way (insertIsolating); any other
// failure is about Postgres, not the rows, and is returned as it is, so that
// no good row is ever degraded by a blip.
func (s *Store) afterCopy(ctx context.Context, records []dlq.Record, n int64, err error) (InsertResult, error) {
	if err == nil {
		return InsertResult{N: int(n)}, nil
	}
	if !isUniqueViolation(err) && !rowFault(err) {
		return InsertResult{}, fmt.Errorf("copy records: %w", err)
	}
	return s.insertIsolating(ctx, records, isUniqueViolation(err))
}

// insertIsolating stores records in one transaction, finding the rows
// Postgres refuses by bisection: a part that fails for its rows is split in
// two and each half written again (COPY, or with duplicates around,
// INSERT … ON CONFLICT DO NOTHING in a pipeline), down to the single row,
// which is degraded step by step (insertDegrading). One bad row in a batch of
// n costs about 2·log2(n) statements, each in a savepoint. Any failure that is
// not about the rows ends the transaction, so nothing is half-written.
func (s *Store) insertIsolating(ctx context.Context, records []dlq.Record, dups bool) (InsertResult, error) {
	var res InsertResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = InsertResult{}
		idx := make([]int, len(records))
		for i := range idx {
			idx[i] = i
		}
		return isolate(ctx, tx, records, idx, dups, &res)
	})
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert records: %w", err)
	}
	return res, nil
}

// isolate stores records[idx...] (see insertIsolating). dups says the part
// may hold rows already stored, which COPY cannot skip.
func isolate(ctx context.Context, tx pgx.Tx, records []dlq.Record, idx []int, dups bool, res *InsertResult) error {
	if len(idx) == 1 {
		return insertDegrading(ctx, tx, records, idx[0], res)
	}
	var stored []bool // by position in idx
	err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
		var err error
		stored, err = writePart(ctx, sp, records, idx, dups)
		return err
	})
	switch {
	case err == nil:
		for k, i := range idx {
			res.add(i, stored[k])
		}
		return nil
	case isUniqueViolation(err) && !dups:
		return isolate(ctx, tx, records, idx, true, res)
	case !rowFault(err):
		return err
	}
	mid := len(idx) / 2
	if err := isolate(ctx, tx, records, idx[:mid], dups, res); err != nil {
		return err
	}
	return isolate(ctx, tx, records, idx[mid:], dups, res)
}

// writePart writes records[idx...] in one statement (COPY) or, when some may
// be stored already, one pipeline of INSERT … ON CONFLICT DO NOTHING, and
// says which it stored.
func writePart(ctx context.Context, tx pgx.Tx, records []dlq.Record, idx []int, dups bool) ([]bool, error) {
	stored := make([]bool, len(idx))
	if !dups {
		_, err := copyRecords(ctx, tx, records, idx, asJSON)
		for k := range stored {
			stored[k] = true
		}
		return stored, err
	}
	batch := &pgx.Batch{}
	for k, i := range idx {
		vals, err := insertValues(&records[i], asJSON, "")
		if err != nil {
			return nil, fmt.Errorf("encode record %s: %w", records[i].ID, err)
		}
		batch.Queue(insertIgnoringDuplicates, vals...).Exec(func(tag pgconn.CommandTag) error {
			stored[k] = tag.RowsAffected() > 0
			return nil
		})
	}
	return stored, tx.SendBatch(ctx, batch).Close()
}

// insertDegrading stores one record, skipping it when it is stored already.
// When Postgres refuses the row for what it holds, it is stored again with
// its error details as text, then without its payload (the reason kept),
// then in its minimal form (asMinimal). A record that not even its minimal
// form gets in is not the record's fault: that error is returned, and the
// caller tries again later.
func insertDegrading(ctx context.Context, tx pgx.Tx, records []dlq.Record, i int, res *InsertResult) error {
	r := &records[i]
	modes := []jsonMode{asJSON, asTextDetails, asText, asMinimal}
	if !hasDetails(r.Errors) {
		modes = slices.DeleteFunc(modes, func(m jsonMode) bool { return m == asTextDetails })
	}
	var reason string
	var err error
	for _, mode := range modes {
		var stored bool
		err = pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			vals, err := insertValues(r, mode, reason)
			if err != nil {
				return fmt.Errorf("encode record %s: %w", r.ID, err)
			}
			tag, err := sp.Exec(ctx, insertIgnoringDuplicates, vals...)
			stored = tag.RowsAffected() > 0
			return err
		})
		if err == nil {
			res.add(i, stored)
			if stored && mode != asJSON {
				if res.degraded == nil {
					res.degraded = map[int]string{}
				}
				res.degraded[i] = reason
			}
			return nil
		}
		if !rowFault(err) {
			return err
		}
		if mode == asText {
			reason = reasonMinimal(err)
		} else {
			reason = reasonRefused(err)
		}
	}
	return fmt.Errorf("store record %s even in its minimal form: %w", r.ID, err)
}

func hasDetails(errs []dlq.ErrorEntry) bool {
	for _, e := range errs {
		if len(e.Details) > 0 {
			return true
		}
	}
	return false
}

// recordSource feeds records to COPY, encoding each as it is sent: all of
// them, or those at idx.
type recordSource struct {
	records []dlq.Record
	idx     []int // nil: every record
	mode    jsonMode
	i       int
	err     error
}

func newRecordSource(records []dlq.Record, idx []int, mode jsonMode) *recordSource {
	return &recordSource{records: records, idx: idx, mode: mode, i: -1}
}

func (rs *recordSource) Next() bool {
	rs.i++
	n := len(rs.records)
	if rs.idx != nil {
		n = len(rs.idx)
	}
	return rs.err == nil && rs.i < n
}

func (rs *recordSource) Values() ([]any, error) {
	r := &rs.records[rs.i]
	if rs.idx != nil {
		r = &rs.records[rs.idx[rs.i]]
	}
	vals, err := rowValues(r, rs.mode, "")
	if err != nil {
		rs.err = fmt.Errorf("encode record %s: %w", r.ID, err)
	}
	return vals, rs.err
}

func (rs *recordSource) Err() error { return rs.err }

// lifecycleSource feeds the lifecycles of records (all, or those at idx) to
// COPY, in the form their wide rows were written (asJSON).
type lifecycleSource struct {
	records []dlq.Record
	idx     []int
	i       int
	err     error
}

func (ls *lifecycleSource) Next() bool {
	ls.i++
	n := len(ls.records)
	if ls.idx != nil {
		n = len(ls.idx)
	}
	return ls.err == nil && ls.i < n
}

func (ls *lifecycleSource) Values() ([]any, error) {
	r := &ls.records[ls.i]
	if ls.idx != nil {
		r = &ls.records[ls.idx[ls.i]]
	}
	id, err := recordID(r)
	if err != nil {
		ls.err = fmt.Errorf("encode record %s: %w", r.ID, err)
		return nil, ls.err
	}
	return lifecycleValues(r, id, asJSON), nil
}

func (ls *lifecycleSource) Err() error { return ls.err }

// coordColumns are the columns of redrive_record_coord, in the order
// coordValues gives them.
var coordColumns = []string{"dlq_topic", "dlq_partition", "dlq_offset", "dlq_timestamp", "id"}

// coordIndex is, for each of coordColumns, its index in dataColumns.
var coordIndex = func() []int {
	idx := make([]int, len(coordColumns))
	for i, c := range coordColumns {
		idx[i] = slices.Index(dataColumns, c)
		if idx[i] < 0 {
			panic("store: coordinate column " + c + " is not a data column")
		}
	}
	return idx
}()

// coordValues picks a record's coordinates out of its rowValues.
func coordValues(vals []any) []any { return appendCoordValues(nil, vals) }

// appendCoordValues appends coordValues to dst (see appendLifecycleValues).
func appendCoordValues(dst []any, vals []any) []any {
	for _, j := range coordIndex {
		dst = append(dst, vals[j])
	}
	return dst
}

// coordPlaceholders are the placeholders of insertIgnoringDuplicates' data
// values that hold the coordinates, in coordColumns' order.
func coordPlaceholders() string {
	types := pgtype.NewMap()
	ps := make([]string, len(coordIndex))
	for i, j := range coordIndex {
		t, _ := types.TypeForOID(dataOIDs[j])
		ps[i] = "$" + strconv.Itoa(j+1) + "::" + t.Name
	}
	return strings.Join(ps, ", ")
}
