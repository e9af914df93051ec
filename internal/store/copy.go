package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/redrive/redrive/internal/dlq"
)

// recordOIDs are the Postgres types of recordColumns, in order, for encoding
// rows without asking the server (TestRecordOIDsMatchTheTable checks them
// against the migrated table).
var recordOIDs = []uint32{
	pgtype.UUIDOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.Int4OID, pgtype.Int4OID,
	pgtype.Int4OID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.TextOID,
	pgtype.TextOID, pgtype.Int4OID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.TextOID,
	pgtype.ByteaOID, pgtype.ByteaOID, pgtype.JSONBOID, pgtype.JSONBOID, pgtype.TextOID, pgtype.JSONBOID, pgtype.JSONBOID, pgtype.JSONBOID,
	pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID,
	pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TimestamptzOID,
	pgtype.JSONBOID, pgtype.JSONBOID, pgtype.JSONBOID, pgtype.TextOID, pgtype.BoolOID,
}

var copyRecordsSQL = "COPY redrive_record (" + insertColumns + ") FROM STDIN (FORMAT binary)"

// copyHeader opens a binary COPY stream: signature, flags, header extension.
var copyHeader = []byte("PGCOPY\n\377\r\n\000\000\000\000\000\000\000\000\000")

// EncodedRecords is a batch of new records together with their rows encoded
// as one binary COPY stream, made by an Encoder ahead of InsertEncoded: the
// encoding (JSON checks, headers, error history, binary values) is done
// before the batch's turn to be written, so the write is a bare COPY.
type EncodedRecords struct {
	Records []dlq.Record
	data    *[]byte // nil when a record could not be encoded: InsertEncoded takes InsertRecords' path
}

// Release returns the batch's buffer for reuse. The batch must not be
// inserted after.
func (e *EncodedRecords) Release() {
	if e.data != nil {
		copyBuffers.Put(e.data)
		e.data = nil
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
	bufp := copyBuffers.Get().(*[]byte)
	buf := append((*bufp)[:0], copyHeader...)
	for i := range records {
		vals, err := rowValues(&records[i], asJSONUnchecked, "")
		if err != nil {
			copyBuffers.Put(bufp)
			return out, fmt.Errorf("encode record %s: %w", records[i].ID, err)
		}
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(vals)))
		for j, v := range vals {
			at := len(buf)
			buf = binary.BigEndian.AppendUint32(buf, 0xFFFFFFFF) // NULL unless a value follows
			enc, err := e.types.Encode(recordOIDs[j], pgtype.BinaryFormatCode, v, buf)
			if err != nil {
				copyBuffers.Put(bufp)
				return out, fmt.Errorf("encode record %s: column %s: %w", records[i].ID, recordColumns[j], err)
			}
			if enc != nil {
				buf = enc
				binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
			}
		}
	}
	buf = binary.BigEndian.AppendUint16(buf, 0xFFFF) // end of stream
	*bufp = buf
	out.data = bufp
	return out, nil
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
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return InsertResult{}, fmt.Errorf("copy records: %w", err)
	}
	tag, err := conn.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(*e.data), copyRecordsSQL)
	conn.Release()
	// A value shaped like JSON that is not (the batch was encoded without
	// the full check) fails the COPY as a row fault: the slow way writes the
	// batch again checked.
	return s.afterCopy(ctx, e.Records, tag.RowsAffected(), err)
}
