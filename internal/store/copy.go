package store

import (
	"fmt"
	"io"
	"strings"

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
	w := &r.enc.row
	switch r.table {
	case coordTable:
		w.begin(buf, coordColumns)
		writeCoordRow(w, rec, id)
	case lifecycleTable:
		w.begin(buf, lifecycleColumns)
		writeLifecycleRow(w, rec, id, r.mode)
	default:
		w.begin(buf, dataColumns)
		if err := writeDataRow(w, rec, id, r.mode, ""); err != nil {
			return buf, err
		}
	}
	return w.end()
}

// keepRow bounds the row a rowReader keeps encoding into (a row holds a
// record's value: one of megabytes is not kept).
const keepRow = 1 << 20

// encoder encodes the rows of COPY streams, reusing its buffers from row to
// row. It is not safe for concurrent use.
type encoder struct {
	row binaryRow
}

// newEncoder returns an encoder.
func newEncoder() *encoder { return &encoder{} }
