package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// rowWriter takes the values of one row, a column at a time, in its table's
// column order (dataColumns, lifecycleColumns, coordColumns). writeDataRow,
// writeLifecycleRow and writeCoordRow say once what a record's rows hold,
// for both ways rows are written: binaryRow appends them in COPY's binary
// format as they come, boxing nothing (ingest writes some fifty values a
// record), and argRow collects them as the arguments of the slow path's
// INSERTs. TestBinaryRowsAreWhatPgxEncodes checks the two agree, byte for
// byte, with the column types of dataOIDs, lifecycleOIDs and coordOIDs.
type rowWriter interface {
	uuid(v pgtype.UUID)
	text(s string)
	int4(v int) // outside int4's range, the row fails
	int8(v int64)
	timestamptz(t time.Time)
	negInfinity() // a timestamptz of -infinity
	bytea(b []byte)
	jsonb(b []byte) // b is JSON text
	// built is jsonb for a value built in scratch's buffer, which the
	// writer may then keep for the next.
	built(b []byte)
	boolean(v bool)
	null()
	// scratch is where a jsonb value may be built before built takes it:
	// binaryRow's buffer, reused row after row; nil for argRow, which keeps
	// the values it is given.
	scratch() []byte
}

// textOrNull writes s, or NULL when it is empty.
func textOrNull(w rowWriter, s string) {
	if s == "" {
		w.null()
		return
	}
	w.text(s)
}

// timeOrNull writes *t, or NULL when t is nil.
func timeOrNull(w rowWriter, t *time.Time) {
	if t == nil {
		w.null()
		return
	}
	w.timestamptz(*t)
}

// timeOrNegInf writes t, or -infinity when it is unknown (zero), as the DLQ
// timestamp columns keep rows stored before they existed.
func timeOrNegInf(w rowWriter, t time.Time) {
	if t.IsZero() {
		w.negInfinity()
		return
	}
	w.timestamptz(t)
}

// binaryRow encodes rows in the binary COPY format, the bytes
// pgtype.Map.Encode gives for each value. Its buffers are reused from row
// to row; it is not safe for concurrent use.
type binaryRow struct {
	buf     []byte
	columns []string // of the row being written
	n       int      // the columns written so far
	err     error
	tmp     []byte // scratch's buffer
}

// begin starts a row of columns, appended to buf.
func (w *binaryRow) begin(buf []byte, columns []string) {
	w.buf, w.columns, w.n, w.err = binary.BigEndian.AppendUint16(buf, uint16(len(columns))), columns, 0, nil
}

// end returns the buffer with the row appended, or why the row could not be
// encoded.
func (w *binaryRow) end() ([]byte, error) {
	if w.err == nil && w.n != len(w.columns) {
		w.err = fmt.Errorf("a row of %d columns got %d values", len(w.columns), w.n)
	}
	return w.buf, w.err
}

// field appends a value's length; the value follows.
func (w *binaryRow) field(size int) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(size))
	w.n++
}

func (w *binaryRow) uuid(v pgtype.UUID) {
	if !v.Valid {
		w.null()
		return
	}
	w.field(16)
	w.buf = append(w.buf, v.Bytes[:]...)
}

func (w *binaryRow) text(s string) {
	w.field(len(s))
	w.buf = append(w.buf, s...)
}

func (w *binaryRow) int4(v int) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		if w.err == nil && w.n < len(w.columns) {
			w.err = fmt.Errorf("column %s: %d is beyond int4's range", w.columns[w.n], v)
		}
		w.null()
		return
	}
	w.field(4)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(int32(v)))
}

func (w *binaryRow) int8(v int64) {
	w.field(8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v))
}

// timestamptz writes t as microseconds since 2000-01-01 UTC
// (sub-microseconds truncated toward zero, as pgx does).
func (w *binaryRow) timestamptz(t time.Time) {
	w.field(8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(t.Unix()*1000000+int64(t.Nanosecond())/1000-y2k))
}

func (w *binaryRow) negInfinity() {
	w.field(8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, 1<<63) // math.MinInt64
}

func (w *binaryRow) bytea(b []byte) {
	if b == nil {
		w.null()
		return
	}
	w.field(len(b))
	w.buf = append(w.buf, b...)
}

// jsonb writes jsonb's binary format: version 1, then the text.
func (w *binaryRow) jsonb(b []byte) {
	if b == nil {
		w.null()
		return
	}
	w.field(1 + len(b))
	w.buf = append(append(w.buf, 1), b...)
}

func (w *binaryRow) built(b []byte) {
	w.jsonb(b)
	if cap(b) > cap(w.tmp) && cap(b) <= keepRow { // scratch grew as b was built
		w.tmp = b[:0]
	}
}

func (w *binaryRow) boolean(v bool) {
	w.field(1)
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

func (w *binaryRow) null() {
	w.buf = binary.BigEndian.AppendUint32(w.buf, math.MaxUint32) // a length of -1
	w.n++
}

func (w *binaryRow) scratch() []byte {
	if cap(w.tmp) == 0 {
		w.tmp = make([]byte, 0, 1024)
	}
	return w.tmp[:0]
}

// y2k is the epoch of Postgres's binary timestamps.
var y2k = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// argRow collects a row's values as pgx arguments, in the Go types pgx
// encodes as the columns' types.
type argRow struct{ vals []any }

func (a *argRow) uuid(v pgtype.UUID)      { a.vals = append(a.vals, v) }
func (a *argRow) text(s string)           { a.vals = append(a.vals, s) }
func (a *argRow) int4(v int)              { a.vals = append(a.vals, v) } // pgx refuses one beyond int4
func (a *argRow) int8(v int64)            { a.vals = append(a.vals, v) }
func (a *argRow) timestamptz(t time.Time) { a.vals = append(a.vals, t) }
func (a *argRow) bytea(b []byte)          { a.vals = append(a.vals, b) }
func (a *argRow) jsonb(b []byte)          { a.vals = append(a.vals, b) }
func (a *argRow) built(b []byte)          { a.vals = append(a.vals, b) }
func (a *argRow) boolean(v bool)          { a.vals = append(a.vals, v) }
func (a *argRow) null()                   { a.vals = append(a.vals, nil) }
func (a *argRow) scratch() []byte         { return nil }

func (a *argRow) negInfinity() {
	a.vals = append(a.vals, pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true})
}
