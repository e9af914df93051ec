package pgcopy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store/pgcopy"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// twoTables makes tables a and b (an int primary key each) and returns a
// connection of the pool, released when the test ends.
func twoTables(t *testing.T) (*pgxpool.Pool, *pgconn.PgConn) {
	t.Helper()
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE a (n int PRIMARY KEY); CREATE TABLE b (n int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return pool, conn.Conn().PgConn()
}

func rows(from, to int) io.Reader {
	var b []byte
	for n := from; n < to; n++ {
		b = append(strconv.AppendInt(b, int64(n), 10), '\n')
	}
	return bytes.NewReader(b)
}

func counts(t *testing.T, pool *pgxpool.Pool) (a, b int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), "SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b)").Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// usable checks that conn is idle outside a transaction and answers.
func usable(t *testing.T, conn *pgconn.PgConn) {
	t.Helper()
	if conn.IsClosed() || conn.TxStatus() != 'I' {
		t.Fatalf("connection closed=%v, transaction status %q; want open and idle", conn.IsClosed(), conn.TxStatus())
	}
	if _, err := conn.Exec(context.Background(), "SELECT 1").ReadAll(); err != nil {
		t.Fatalf("the connection does not answer: %v", err)
	}
}

func TestStreamsAreCopiedInOneQuery(t *testing.T) {
	t.Parallel()
	pool, conn := twoTables(t)
	// 200,000 rows a table: many CopyData messages each.
	tags, err := pgcopy.InOneQuery(context.Background(), conn,
		pgcopy.Stream{SQL: "COPY a FROM STDIN", Rows: rows(0, 200_000)},
		pgcopy.Stream{SQL: "COPY b FROM STDIN", Rows: rows(0, 3)})
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 2 || tags[0].RowsAffected() != 200_000 || tags[1].RowsAffected() != 3 {
		t.Fatalf("tags = %v; want COPY 200000, COPY 3", tags)
	}
	if a, b := counts(t, pool); a != 200_000 || b != 3 {
		t.Fatalf("rows = %d, %d; want 200000, 3", a, b)
	}
	usable(t, conn)
}

// A statement that fails takes the others with it, whichever it is, and
// the connection stays usable.
func TestAFailingStatementLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		a, b io.Reader
		code string
	}{
		{"the first", strings.NewReader("1\n1\n"), rows(0, 10), "23505"},
		{"the last", rows(0, 10), strings.NewReader("1\nnot a number\n"), "22P02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, conn := twoTables(t)
			_, err := pgcopy.InOneQuery(context.Background(), conn,
				pgcopy.Stream{SQL: "COPY a FROM STDIN", Rows: tc.a}, pgcopy.Stream{SQL: "COPY b FROM STDIN", Rows: tc.b})
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != tc.code {
				t.Fatalf("err = %v; want Postgres's %s", err, tc.code)
			}
			if a, b := counts(t, pool); a != 0 || b != 0 {
				t.Fatalf("rows = %d, %d; want none", a, b)
			}
			usable(t, conn)
		})
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// A stream that cannot be read fails its COPY: Postgres reports the reason,
// and nothing is written.
func TestAnUnreadableStreamFailsTheQuery(t *testing.T) {
	t.Parallel()
	pool, conn := twoTables(t)
	_, err := pgcopy.InOneQuery(context.Background(), conn,
		pgcopy.Stream{SQL: "COPY a FROM STDIN", Rows: rows(0, 10)},
		pgcopy.Stream{SQL: "COPY b FROM STDIN", Rows: io.MultiReader(rows(0, 10), failingReader{errors.New("record 7 did not encode")})})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.Contains(pgErr.Message, "record 7 did not encode") {
		t.Fatalf("err = %v; want Postgres's report of the failed read", err)
	}
	if a, b := counts(t, pool); a != 0 || b != 0 {
		t.Fatalf("rows = %d, %d; want none", a, b)
	}
	usable(t, conn)
}

// When ctx ends while Postgres does not read (a lock held elsewhere), the
// call returns instead of blocking on the write, closes the connection (a
// reply is still owed on it), and nothing is written.
func TestCtxEndingMidQueryClosesTheConnection(t *testing.T) {
	t.Parallel()
	pool, conn := twoTables(t)
	bg := context.Background()
	locker, err := pool.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(bg, "LOCK TABLE a IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	big := rows(0, 3_000_000) // about 20 MB: more than the sockets' buffers hold
	ctx, cancel := context.WithTimeout(bg, 500*time.Millisecond)
	defer cancel()
	start := testdate.Now()
	_, err = pgcopy.InOneQuery(ctx, conn, pgcopy.Stream{SQL: "COPY a FROM STDIN", Rows: big})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want the context's deadline", err)
	}
	if waited := testdate.Since(start); waited < 400*time.Millisecond || waited > 10*time.Second {
		t.Fatalf("returned after %v; want when the deadline passed", waited)
	}
	if !conn.IsClosed() {
		t.Fatal("the connection is still open, with a reply owed on it")
	}
	if err := locker.Rollback(bg); err != nil {
		t.Fatal(err)
	}
	if a, _ := counts(t, pool); a != 0 {
		t.Fatalf("rows = %d; want none", a)
	}
}

func TestAConnectionInATransactionIsRefused(t *testing.T) {
	t.Parallel()
	pool, conn := twoTables(t)
	if _, err := conn.Exec(context.Background(), "BEGIN").ReadAll(); err != nil {
		t.Fatal(err)
	}
	_, err := pgcopy.InOneQuery(context.Background(), conn, pgcopy.Stream{SQL: "COPY a FROM STDIN", Rows: rows(0, 3)})
	if err == nil || !strings.Contains(err.Error(), "outside a transaction") {
		t.Fatalf("err = %v; want a refusal", err)
	}
	if _, err := conn.Exec(context.Background(), "ROLLBACK").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if a, _ := counts(t, pool); a != 0 {
		t.Fatalf("rows = %d; want none", a)
	}
}
