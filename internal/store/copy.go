package store

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

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

// copyTrailer closes a binary COPY stream: a row of -1 fields.
var copyTrailer = []byte{0xFF, 0xFF}

// copyTable is a table a record is written to by COPY.
type copyTable int

const (
	coordTable copyTable = iota
	lifecycleTable
	dataTable
)

// rowReader is the binary COPY stream of one table's rows of records (all
// of them, or those at idx), encoded as pgconn reads it: a row at a time,
// while Postgres takes in the rows sent before. A batch's rows are never
// held whole: they would double its memory, each holding its record's
// value. A write that fails is sent again from a new reader.
type rowReader struct {
	enc     *encoder
	records []dlq.Record
	idx     []int // nil: every record
	table   copyTable
	mode    jsonMode
	next    int    // the record whose row comes next
	buf     []byte // encoded, not yet read: buf[off:]
	off     int
	begun   bool
	ended   bool
	vals    []any
	err     error
}

func newRowReader(enc *encoder, records []dlq.Record, idx []int, table copyTable, mode jsonMode) *rowReader {
	return &rowReader{enc: enc, records: records, idx: idx, table: table, mode: mode}
}

func (r *rowReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if r.off == len(r.buf) && !r.fill() {
			break
		}
		c := copy(p[n:], r.buf[r.off:])
		n, r.off = n+c, r.off+c
	}
	if n > 0 {
		return n, nil
	}
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}

// fill encodes what comes next into buf: the header, each row, then the
// trailer. It reports false at the end of the stream, or when a record did
// not encode (err says which).
func (r *rowReader) fill() bool {
	if cap(r.buf) > keepRow { // after a huge row
		r.buf = nil
	}
	r.buf, r.off = r.buf[:0], 0
	count := len(r.records)
	if r.idx != nil {
		count = len(r.idx)
	}
	switch {
	case r.err != nil || r.ended:
		return false
	case !r.begun:
		r.begun, r.buf = true, append(r.buf, copyHeader...)
		return true
	case r.next == count:
		r.ended, r.buf = true, append(r.buf, copyTrailer...)
		return true
	}
	rec := &r.records[r.next]
	if r.idx != nil {
		rec = &r.records[r.idx[r.next]]
	}
	r.next++
	var err error
	if r.buf, err = r.appendRow(r.buf, rec); err != nil {
		r.err = fmt.Errorf("encode record %s: %w", rec.ID, err)
		return false
	}
	return true
}

// appendRow appends rec's row of r's table to buf.
func (r *rowReader) appendRow(buf []byte, rec *dlq.Record) ([]byte, error) {
	id, err := recordID(rec)
	if err != nil {
		return buf, err
	}
	switch r.table {
	case coordTable:
		r.vals = append(r.vals[:0], rec.DLQ.Topic, rec.DLQ.Partition, rec.DLQ.Offset, timestampOrNegInf(rec.DLQ.Timestamp), id)
		return r.enc.appendRow(buf, r.vals, coordOIDs, coordColumns)
	case lifecycleTable:
		r.vals = appendLifecycleValues(r.vals[:0], rec, id, r.mode)
		return r.enc.appendRow(buf, r.vals, lifecycleOIDs, lifecycleColumns)
	default:
		if r.vals, err = appendRowValues(r.vals[:0], rec, r.mode, ""); err != nil {
			return buf, err
		}
		return r.enc.appendRow(buf, r.vals, dataOIDs, dataColumns)
	}
}

// keepRow bounds the row a rowReader keeps encoding into (a row holds a
// record's value: one of megabytes is not kept).
const keepRow = 1 << 20

// encoder encodes rows in the binary COPY format. It is not safe for
// concurrent use (its type map caches encode plans).
type encoder struct {
	types *pgtype.Map
}

// newEncoder returns an encoder.
func newEncoder() *encoder { return &encoder{types: pgtype.NewMap()} }

// appendRow appends one row of a binary COPY stream to buf.
func (e *encoder) appendRow(buf []byte, vals []any, oids []uint32, columns []string) ([]byte, error) {
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
