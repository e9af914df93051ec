// Package pgcopy sends several COPY FROM STDIN statements to Postgres as one
// simple-protocol query, streaming each one's rows after the other without
// waiting for a reply in between.
//
// Postgres runs the statements of one simple query as one implicit
// transaction, so a write to several tables that would otherwise cost five
// round trips (BEGIN, a COPY per table, COMMIT) costs one, and stays
// all-or-nothing. On a machine whose cores are busy, each round trip waits
// for both ends to be scheduled again: at ingest's batch sizes that wait
// was several percent of the batch (the runs are in the git history of
// docs/performance.md).
//
// The protocol allows it: the server reads the copy data of each COPY in
// turn from the connection, and after an error it skips the rest of the
// query and ignores the copy data still arriving ("we probably got here
// because a COPY failed, and the frontend is still sending data", in
// Postgres's tcop/postgres.c), so sending everything before reading is safe.
package pgcopy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Stream is one COPY … FROM STDIN statement and its data.
type Stream struct {
	SQL  string    // the COPY statement, without a trailing semicolon
	Rows io.Reader // its data, in the statement's format
}

// chunk is the copy data sent in one CopyData message (pgconn's size).
const chunk = 64 << 10

// InOneQuery runs streams as one query on conn, which must be idle and not
// in a transaction, and returns each statement's command tag. Either every
// statement took effect or none did. An error reading a stream's rows fails
// its COPY (CopyFail): Postgres reports it, and that is what is returned.
// When the exchange cannot be finished (a network error, or ctx ending
// mid-query), conn is closed: a connection pool then drops it instead of
// handing out a connection with a reply still unread.
func InOneQuery(ctx context.Context, conn *pgconn.PgConn, streams ...Stream) ([]pgconn.CommandTag, error) {
	if len(streams) == 0 {
		return nil, nil
	}
	if conn.IsBusy() || conn.TxStatus() != 'I' {
		return nil, fmt.Errorf("pgcopy: the connection must be idle outside a transaction (status %q)", conn.TxStatus())
	}
	if err := send(ctx, conn, streams); err != nil {
		closeBroken(conn)
		return nil, err
	}
	tags, err := receive(ctx, conn)
	var pgErr *pgconn.PgError
	if err != nil && !errors.As(err, &pgErr) {
		closeBroken(conn)
	}
	return tags, err
}

// send writes the query, then each stream's data and its end (CopyDone, or
// CopyFail at a read error, after which nothing more is sent: Postgres
// would skip it). pgconn's writes watch ctx; these go to the frontend
// directly, so ctx ending sets a past deadline on the connection instead.
func send(ctx context.Context, conn *pgconn.PgConn, streams []Stream) error {
	stop := context.AfterFunc(ctx, func() { _ = conn.Conn().SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	fe := conn.Frontend()
	sql := streams[0].SQL
	for _, s := range streams[1:] {
		sql += "; " + s.SQL
	}
	fe.SendQuery(&pgproto3.Query{String: sql})
	if err := fe.Flush(); err != nil {
		return sendErr(ctx, err)
	}
	buf := make([]byte, 5+chunk)
	for _, s := range streams {
		failed := false
		for {
			n, err := io.ReadFull(s.Rows, buf[5:])
			if n > 0 {
				buf[0] = 'd'
				binary.BigEndian.PutUint32(buf[1:5], uint32(n+4))
				if err := fe.SendUnbufferedEncodedCopyData(buf[:5+n]); err != nil {
					return sendErr(ctx, err)
				}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			if err != nil {
				fe.Send(&pgproto3.CopyFail{Message: err.Error()})
				failed = true
				break
			}
		}
		if failed {
			break
		}
		fe.Send(&pgproto3.CopyDone{})
	}
	if err := fe.Flush(); err != nil {
		return sendErr(ctx, err)
	}
	if !stop() { // ctx ended as the last bytes went: the deadline may be set
		return ctx.Err()
	}
	return nil
}

func sendErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("send copy data: %w", err)
}

// receive reads the replies up to ReadyForQuery: a command tag per
// statement that completed, and the error that ended the query, if one did.
func receive(ctx context.Context, conn *pgconn.PgConn) ([]pgconn.CommandTag, error) {
	var tags []pgconn.CommandTag
	var pgErr error
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return nil, err
		}
		switch m := msg.(type) {
		case *pgproto3.CommandComplete:
			tags = append(tags, pgconn.NewCommandTag(string(m.CommandTag)))
		case *pgproto3.ErrorResponse:
			pgErr = pgconn.ErrorResponseToPgError(m)
		case *pgproto3.ReadyForQuery:
			if pgErr != nil {
				return nil, pgErr
			}
			return tags, nil
		}
	}
}

// closeBroken closes a connection left mid-exchange.
func closeBroken(conn *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
