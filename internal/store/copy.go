package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
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
	Records   []dlq.Record
	data      *[]byte // nil when a record could not be encoded: InsertEncoded takes InsertRecords' path
	lifecycle *[]byte
	coord     *[]byte
}

// Release returns the batch's buffers for reuse. The batch must not be
// inserted after.
func (e *EncodedRecords) Release() {
	if e.data != nil {
		copyBuffers.Put(e.data)
		copyBuffers.Put(e.lifecycle)
		copyBuffers.Put(e.coord)
		e.data, e.lifecycle, e.coord = nil, nil, nil
	}
}

// copyBuffers recycles COPY streams: a batch of 5,000 1 KiB records is ~8 MiB.
var copyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// Encoder encodes batches of records for InsertEncoded. It is not safe for
// concurrent use (its type map caches encode plans).
type Encoder struct{ types *pgtype.Map }

// NewEncoder returns an Encoder.
func NewEncoder() *Encoder { return &Encoder{types: pgtype.NewMap()} }

// Encode encodes records as a binary COPY stream. When a record does not
// encode, it says why, and the batch it returns is left unencoded: still
// usable, InsertEncoded writes it the slow way (which reports the record).
func (e *Encoder) Encode(records []dlq.Record) (*EncodedRecords, error) {
	out := &EncodedRecords{Records: records}
	bufp, lbufp, cbufp := copyBuffers.Get().(*[]byte), copyBuffers.Get().(*[]byte), copyBuffers.Get().(*[]byte)
	buf, lbuf, cbuf := append((*bufp)[:0], copyHeader...), append((*lbufp)[:0], copyHeader...), append((*cbufp)[:0], copyHeader...)
	fail := func(err error) (*EncodedRecords, error) {
		copyBuffers.Put(bufp)
		copyBuffers.Put(lbufp)
		copyBuffers.Put(cbufp)
		return out, err
	}
	for i := range records {
		r := &records[i]
		vals, err := rowValues(r, asJSONUnchecked, "")
		if err != nil {
			return fail(fmt.Errorf("encode record %s: %w", r.ID, err))
		}
		if buf, err = e.appendRow(buf, vals, dataOIDs, dataColumns); err != nil {
			return fail(fmt.Errorf("encode record %s: %w", r.ID, err))
		}
		if lbuf, err = e.appendRow(lbuf, lifecycleValues(r, vals[0].(pgtype.UUID), asJSONUnchecked), lifecycleOIDs, lifecycleColumns); err != nil {
			return fail(fmt.Errorf("encode record %s: %w", r.ID, err))
		}
		if cbuf, err = e.appendRow(cbuf, coordValues(vals), coordOIDs, coordColumns); err != nil {
			return fail(fmt.Errorf("encode record %s: %w", r.ID, err))
		}
	}
	*bufp = binary.BigEndian.AppendUint16(buf, 0xFFFF) // end of stream
	*lbufp = binary.BigEndian.AppendUint16(lbuf, 0xFFFF)
	*cbufp = binary.BigEndian.AppendUint16(cbuf, 0xFFFF)
	out.data, out.lifecycle, out.coord = bufp, lbufp, cbufp
	return out, nil
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
	if e.data == nil {
		return s.InsertRecords(ctx, e.Records)
	}
	var tag pgconn.CommandTag
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		pg := tx.Conn().PgConn()
		// The coordinates first: a batch consumed again fails here, on
		// their primary key, before any wide row is written.
		if _, err := pg.CopyFrom(ctx, bytes.NewReader(*e.coord), copyCoordSQL); err != nil {
			return err
		}
		// Then the lifecycles before the wide rows: every statement takes
		// the two tables' locks in that order (the view's), so that none
		// waits on another crosswise, partition DDL included.
		if _, err := pg.CopyFrom(ctx, bytes.NewReader(*e.lifecycle), copyLifecycleSQL); err != nil {
			return err
		}
		var err error
		tag, err = pg.CopyFrom(ctx, bytes.NewReader(*e.data), copyDataSQL)
		return err
	})
	// A value shaped like JSON that is not (the batch was encoded without
	// the full check) fails the COPY as a row fault: the slow way writes the
	// batch again checked.
	return s.afterCopy(ctx, e.Records, tag.RowsAffected(), err)
}
