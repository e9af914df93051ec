package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/redrive/redrive/internal/dlq"
)

// dataOIDs and lifecycleOIDs are the Postgres types of dataColumns and
// lifecycleColumns, in order, for encoding rows without asking the server
// (TestRecordOIDsMatchTheTables checks them against the migrated tables).
var (
	dataOIDs = []uint32{
		pgtype.UUIDOID, pgtype.TextOID, pgtype.TextOID, pgtype.Int4OID,
		pgtype.Int4OID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.TextOID,
		pgtype.TextOID, pgtype.Int4OID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.TextOID,
		pgtype.ByteaOID, pgtype.ByteaOID, pgtype.JSONBOID, pgtype.JSONBOID, pgtype.TextOID, pgtype.JSONBOID, pgtype.JSONBOID, pgtype.JSONBOID,
		pgtype.TimestamptzOID, pgtype.TextOID, pgtype.TextOID, pgtype.TimestamptzOID,
		pgtype.JSONBOID, pgtype.JSONBOID, pgtype.JSONBOID, pgtype.TextOID, pgtype.BoolOID,
	}
	lifecycleOIDs = []uint32{
		pgtype.UUIDOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.Int8OID,
		pgtype.TextOID, pgtype.TextOID, pgtype.Int4OID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID,
		pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TextOID,
	}
	coordOIDs = []uint32{pgtype.TextOID, pgtype.Int4OID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.UUIDOID}
)

var (
	copyDataSQL      = "COPY redrive_record_data (" + strings.Join(dataColumns, ", ") + ") FROM STDIN (FORMAT binary)"
	copyLifecycleSQL = "COPY redrive_lifecycle (" + strings.Join(lifecycleColumns, ", ") + ") FROM STDIN (FORMAT binary)"
	copyCoordSQL     = "COPY redrive_record_coord (" + strings.Join(coordColumns, ", ") + ") FROM STDIN (FORMAT binary)"
)

// copyHeader opens a binary COPY stream: signature, flags, header extension.
var copyHeader = []byte("PGCOPY\n\377\r\n\000\000\000\000\000\000\000\000\000")

// EncodedRecords is a batch of new records together with their rows encoded
// as binary COPY streams (their DLQ coordinates, the wide rows, and their
// lifecycles), made by an Encoder ahead of InsertEncoded: the encoding (JSON
// checks, headers, error history, binary values) is done before the batch's
// turn to be written, so the write is three bare COPYs in one transaction.
type EncodedRecords struct {
	Records []dlq.Record
	// The streams; encoded is false when a record could not be encoded:
	// InsertEncoded takes InsertRecords' path.
	data, lifecycle, coord copyStream
	encoded                bool
}

// Release gives the batch's streams back for the next batches. The batch
// must not be inserted after.
func (e *EncodedRecords) Release() {
	e.data.release()
	e.lifecycle.release()
	e.coord.release()
	e.encoded = false
}

// copyChunk is the size of the pieces a COPY stream is held in. A stream
// of pieces never grows by copying (one growing slice held its old and new
// arrays at once, and rounded its capacity up to twice what it held), and
// its pieces are reused by the next batches whatever their size.
const copyChunk = 128 << 10

// copyChunks holds the pieces released batches gave back until the next
// batches take them: while ingest runs, before the garbage collector's
// next cycle; an idle ingest keeps none.
var copyChunks = sync.Pool{New: func() any { return new([]byte) }}

// keepRow bounds the scratch row an Encoder keeps between batches (a row
// holds a record's value: one of megabytes is not kept).
const keepRow = 1 << 20

// copyStream is a binary COPY stream held in copyChunk pieces.
type copyStream struct {
	chunks [][]byte
	maxRow int // the largest row appended so far
}

// reader reads the stream from its start (each time: a write that failed
// is sent again), leaving it as it is.
func (s *copyStream) reader() io.Reader { return &chunkReader{chunks: s.chunks} }

// chunkReader reads a copyStream: chunks[i][off:] comes next.
type chunkReader struct {
	chunks [][]byte
	i, off int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.i < len(r.chunks) {
		c := copy(p[n:], r.chunks[r.i][r.off:])
		n, r.off = n+c, r.off+c
		if r.off == len(r.chunks[r.i]) {
			r.i, r.off = r.i+1, 0
		}
	}
	if n == 0 && r.i == len(r.chunks) {
		return 0, io.EOF
	}
	return n, nil
}

// Encoder encodes batches of records for InsertEncoded. Encode is not safe
// for concurrent use (its type map caches encode plans); Release of the
// batches it made may run on another goroutine.
type Encoder struct {
	types *pgtype.Map
	row   []byte // scratch: one row, before it is appended to its stream
}

// NewEncoder returns an Encoder.
func NewEncoder() *Encoder { return &Encoder{types: pgtype.NewMap()} }

// newChunk returns an empty piece of stream, one released before if any.
func newChunk() []byte {
	if c := *copyChunks.Get().(*[]byte); cap(c) == copyChunk {
		return c[:0]
	}
	return make([]byte, 0, copyChunk)
}

// release gives the stream's pieces back for the next batches.
func (s *copyStream) release() {
	for i, c := range s.chunks {
		copyChunks.Put(&c)
		s.chunks[i] = nil
	}
	s.chunks = nil
}

// append appends p to the stream, in pieces of copyChunk.
func (s *copyStream) append(p []byte) {
	for len(p) > 0 {
		last := len(s.chunks) - 1
		if last < 0 || len(s.chunks[last]) == cap(s.chunks[last]) {
			s.chunks = append(s.chunks, newChunk())
			last++
		}
		c := s.chunks[last]
		n := copy(c[len(c):cap(c)], p)
		s.chunks[last] = c[:len(c)+n]
		p = p[n:]
	}
}

// Encode encodes records as a binary COPY stream. When a record does not
// encode, it says why, and the batch it returns is left unencoded: still
// usable, InsertEncoded writes it the slow way (which reports the record).
func (e *Encoder) Encode(records []dlq.Record) (*EncodedRecords, error) {
	out := &EncodedRecords{Records: records}
	fail := func(err error) (*EncodedRecords, error) {
		out.Release()
		return out, err
	}
	defer func() {
		if cap(e.row) > keepRow {
			e.row = nil
		}
	}()
	out.data.append(copyHeader)
	out.lifecycle.append(copyHeader)
	out.coord.append(copyHeader)
	// The rows' values, reused: each row is encoded before the next is built.
	var vals, life, coord []any
	for i := range records {
		r := &records[i]
		var err error
		vals, err = appendRowValues(vals[:0], r, asJSONUnchecked, "")
		if err != nil {
			return fail(fmt.Errorf("encode record %s: %w", r.ID, err))
		}
		if err := e.appendRowTo(&out.data, vals, dataOIDs, dataColumns); err != nil {
			return fail(fmt.Errorf("encode record %s: %w", r.ID, err))
		}
		life = appendLifecycleValues(life[:0], r, vals[0].(pgtype.UUID), asJSONUnchecked)
		if err := e.appendRowTo(&out.lifecycle, life, lifecycleOIDs, lifecycleColumns); err != nil {
			return fail(fmt.Errorf("encode record %s: %w", r.ID, err))
		}
		coord = appendCoordValues(coord[:0], vals)
		if err := e.appendRowTo(&out.coord, coord, coordOIDs, coordColumns); err != nil {
			return fail(fmt.Errorf("encode record %s: %w", r.ID, err))
		}
	}
	trailer := binary.BigEndian.AppendUint16(nil, 0xFFFF) // end of stream
	out.data.append(trailer)
	out.lifecycle.append(trailer)
	out.coord.append(trailer)
	out.encoded = true
	return out, nil
}

// appendRowTo encodes one row straight into s's last piece when that has
// room for the largest row s has had (no copy), else into the scratch row,
// which is then appended to s across pieces.
func (e *Encoder) appendRowTo(s *copyStream, vals []any, oids []uint32, columns []string) error {
	if n := len(s.chunks); n > 0 && s.maxRow > 0 && cap(s.chunks[n-1])-len(s.chunks[n-1]) >= s.maxRow {
		last := s.chunks[n-1]
		out, err := e.appendRow(last, vals, oids, columns)
		if err != nil {
			return err
		}
		row := out[len(last):]
		s.maxRow = max(s.maxRow, len(row))
		if cap(out) == cap(last) { // written in place
			s.chunks[n-1] = out
			return nil
		}
		// Larger than the room: append moved it to a new array, and the
		// piece is as it was.
		s.append(row)
		return nil
	}
	row, err := e.appendRow(e.row[:0], vals, oids, columns)
	e.row = row
	if err != nil {
		return err
	}
	s.maxRow = max(s.maxRow, len(row))
	s.append(row)
	return nil
}

// appendRow appends one row of a binary COPY stream to buf.
func (e *Encoder) appendRow(buf []byte, vals []any, oids []uint32, columns []string) ([]byte, error) {
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(vals)))
	for j, v := range vals {
		at := len(buf)
		buf = binary.BigEndian.AppendUint32(buf, 0xFFFFFFFF) // NULL unless a value follows
		if enc, known := appendBinary(buf, oids[j], v); known {
			if enc != nil {
				buf = enc
				binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
			}
			continue
		}
		enc, err := e.types.Encode(oids[j], pgtype.BinaryFormatCode, v, buf)
		if err != nil {
			return buf, fmt.Errorf("column %s: %w", columns[j], err)
		}
		if enc != nil {
			buf = enc
			binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
		}
	}
	return buf, nil
}

// y2k is the epoch of Postgres's binary timestamps.
var y2k = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// appendBinary appends v in the binary format of the column type oid, as
// pgtype.Map.Encode would, for the Go types rowValues, lifecycleValues and
// coordValues give; known is false for any other pair, which Map.Encode
// then encodes. A nil result with known true is NULL. Map.Encode looks up
// an encode plan for every value (half of its cost); a batch of 5,000
// records has 255,000 values (TestAppendBinaryMatchesPgx checks the bytes
// are Map.Encode's).
func appendBinary(buf []byte, oid uint32, v any) (out []byte, known bool) {
	switch oid {
	case pgtype.TextOID:
		switch v := v.(type) {
		case string:
			return append(buf, v...), true
		case *string:
			if v == nil {
				return nil, true
			}
			return append(buf, *v...), true
		case nil:
			return nil, true
		}
	case pgtype.Int4OID:
		switch v := v.(type) {
		case int32:
			return binary.BigEndian.AppendUint32(buf, uint32(v)), true
		case int:
			if v >= math.MinInt32 && v <= math.MaxInt32 {
				return binary.BigEndian.AppendUint32(buf, uint32(int32(v))), true
			}
		}
	case pgtype.Int8OID:
		switch v := v.(type) {
		case int64:
			return binary.BigEndian.AppendUint64(buf, uint64(v)), true
		case int:
			return binary.BigEndian.AppendUint64(buf, uint64(int64(v))), true
		}
	case pgtype.TimestamptzOID:
		switch v := v.(type) {
		case time.Time:
			return appendTimestamptz(buf, v), true
		case *time.Time:
			if v == nil {
				return nil, true
			}
			return appendTimestamptz(buf, *v), true
		case pgtype.Timestamptz:
			switch {
			case !v.Valid:
				return nil, true
			case v.InfinityModifier == pgtype.Finite:
				return appendTimestamptz(buf, v.Time), true
			case v.InfinityModifier == pgtype.Infinity:
				return binary.BigEndian.AppendUint64(buf, math.MaxInt64), true
			case v.InfinityModifier == pgtype.NegativeInfinity:
				return binary.BigEndian.AppendUint64(buf, 1<<63), true // math.MinInt64
			}
		case nil:
			return nil, true
		}
	case pgtype.UUIDOID:
		if v, ok := v.(pgtype.UUID); ok {
			if !v.Valid {
				return nil, true
			}
			return append(buf, v.Bytes[:]...), true
		}
	case pgtype.ByteaOID:
		switch v := v.(type) {
		case []byte:
			if v == nil {
				return nil, true
			}
			return append(buf, v...), true
		case nil:
			return nil, true
		}
	case pgtype.JSONBOID:
		switch v := v.(type) {
		case []byte:
			if v == nil {
				return nil, true
			}
			return append(append(buf, 1), v...), true // jsonb's binary format: version 1, then the text
		case nil:
			return nil, true
		}
	case pgtype.BoolOID:
		if v, ok := v.(bool); ok {
			if v {
				return append(buf, 1), true
			}
			return append(buf, 0), true
		}
	}
	return nil, false
}

// appendTimestamptz appends t as a binary timestamptz: microseconds since
// 2000-01-01 UTC (sub-microseconds truncated toward zero, as pgx does).
func appendTimestamptz(buf []byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(buf, uint64(t.Unix()*1000000+int64(t.Nanosecond())/1000-y2k))
}

// InsertEncoded stores a batch made by an Encoder, as InsertRecords does:
// idempotent on the records' DLQ identity, with the same fallbacks for a
// re-consumed batch and for rows Postgres refuses.
func (s *Store) InsertEncoded(ctx context.Context, e *EncodedRecords) (InsertResult, error) {
	if len(e.Records) == 0 {
		return InsertResult{}, nil
	}
	if !e.encoded {
		return s.InsertRecords(ctx, e.Records)
	}
	var tag pgconn.CommandTag
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		pg := tx.Conn().PgConn()
		// The coordinates first: a batch consumed again fails here, on
		// their primary key, before any wide row is written.
		if _, err := pg.CopyFrom(ctx, e.coord.reader(), copyCoordSQL); err != nil {
			return err
		}
		// Then the lifecycles before the wide rows: every statement takes
		// the two tables' locks in that order (the view's), so that none
		// waits on another crosswise, partition DDL included.
		if _, err := pg.CopyFrom(ctx, e.lifecycle.reader(), copyLifecycleSQL); err != nil {
			return err
		}
		var err error
		tag, err = pg.CopyFrom(ctx, e.data.reader(), copyDataSQL)
		return err
	})
	// A value shaped like JSON that is not (the batch was encoded without
	// the full check) fails the COPY as a row fault: the slow way writes the
	// batch again checked.
	return s.afterCopy(ctx, e.Records, tag.RowsAffected(), err)
}
