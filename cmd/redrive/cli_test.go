package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/apptest"
	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// runMainEnv, set to 1, makes the test binary redrive itself: TestMain runs
// main. The README tour's redrive dev (tour_test.go) is this package's code
// so, started as a process of its own, as make run starts it.
const runMainEnv = "REDRIVE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	pgtest.Main(m)
}

const cliKey = "rdk_cli_test_key"

// cliServer runs a processor with one write key and seeds records.
func cliServer(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	brokers := kafkatest.New(t, "dead_letter_queue", "dead_letter_queue.archive", "dead_letter_queue.events", "orders")
	dbURL := pgtest.URL(t)
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(keys, fmt.Appendf(nil, "keys:\n  - {name: cli, scope: write, sha256: %s}\n", auth.Digest(cliKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := apptest.Start(t, brokers, dbURL, app.Options{Logger: slog.New(slog.DiscardHandler)},
		"REDRIVE_AUTH_DISABLED", "false", "REDRIVE_API_KEYS_FILE", keys)
	pool := pgtest.Pool(t, dbURL)
	return "http://" + a.Addr(), pool
}

func seedDiscarded(t *testing.T, pool *pgxpool.Pool, queue string, n int) []string {
	t.Helper()
	now := testdate.Now().UTC()
	recs := make([]dlq.Record, n)
	ids := make([]string, n)
	for i := range recs {
		id := uuid.MustParse(dlq.NewID(testdate.Now()))
		ids[i] = id.String()
		recs[i] = dlq.Record{ID: ids[i], Queue: queue, State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter,
			Attempt: 3, MaxAttempts: 3, Format: dlq.FormatRedrive, Source: dlq.Source{Topic: queue},
			DLQ:   dlq.Coord{Topic: "dead_letter_queue", Offset: int64(i)},
			Value: fmt.Appendf(nil, `{"n":%d}`, i), Retry: json.RawMessage(`{}`), Meta: json.RawMessage(`{}`),
			Errors:    []dlq.ErrorEntry{{Attempt: 3, Type: "db.timeout", Message: "boom", Code: dlq.CodeRetry, OccurredAt: now}},
			CreatedAt: now, UpdatedAt: now, DiscardedAt: &now}
	}
	if _, err := store.New(pool).InsertRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	return ids
}

// run executes the CLI with args and returns stdout and stderr.
func run(t *testing.T, base string, args ...string) (string, string, error) {
	t.Helper()
	cmd := rootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if base != "" {
		args = append(args, "--api-url", base, "--api-key", cliKey)
	}
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestCLIAgainstTheAPI(t *testing.T) {
	base, pool := cliServer(t)
	ids := seedDiscarded(t, pool, "orders", 40)

	out, _, err := run(t, base, "dlq", "list", "--queue", "orders", "--limit", "5")
	if err != nil || !strings.Contains(out, "ERROR TYPE") || strings.Count(out, "orders") != 5 {
		t.Fatalf("dlq list: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "dlq", "list", "--queue", "orders", "-o", "json")
	var page struct {
		Items []map[string]any `json:"items"`
	}
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Items) != 40 {
		t.Fatalf("dlq list -o json: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "dlq", "show", ids[0])
	if err != nil || !strings.Contains(out, `"id": "`+ids[0]+`"`) {
		t.Fatalf("dlq show: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "dlq", "retry", ids[0], "--new-value", `{"n":"edited"}`, "--set-header", "x-by=cli")
	if err != nil || !strings.Contains(out, "retried "+ids[0]) {
		t.Fatalf("dlq retry ID: %v\n%s", err, out)
	}
	// The retried record is redelivered (and so completed) by the running
	// scheduler: the dry run below counts the other 39 once it is.
	eventually.Nil(t, "the retried record redelivered", func() error {
		out, _, err := run(t, base, "dlq", "show", ids[0])
		if err != nil || !strings.Contains(out, `"state": "completed"`) {
			return fmt.Errorf("dlq show: %v\n%s", err, out)
		}
		return nil
	})
	out, _, err = run(t, base, "dlq", "stats")
	if err != nil || !strings.Contains(out, "total") || !strings.Contains(out, "P180D") {
		t.Fatalf("dlq stats: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "dlq", "retry", "--all", "--queue", "orders")
	if err != nil || !strings.Contains(out, "would retry 39 records; nothing changed") {
		t.Fatalf("dlq retry --all (dry run): %v\n%s", err, out)
	}
	out, errOut, err := run(t, base, "dlq", "retry", "--all", "--queue", "orders", "--yes", "--wait", "--rate-limit", "200")
	if err != nil || !strings.Contains(out, "completed: 39 of 39 records") || !strings.Contains(errOut, "100%") {
		t.Fatalf("dlq retry --all --yes --wait: %v\n%s\n%s", err, out, errOut)
	}
	out, _, err = run(t, base, "tasks")
	if err != nil || !strings.Contains(out, "completed") || !strings.Contains(out, "200/s") {
		t.Fatalf("tasks: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "topics")
	if err != nil || !strings.Contains(out, "orders") || !strings.Contains(out, "DELIVERY") {
		t.Fatalf("topics: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "topics", "pause", "orders")
	if err != nil || out != "topic orders is paused\n" {
		t.Fatalf("topics pause: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "dlq", "purge", ids[1])
	if err != nil || !strings.Contains(out, "deleted "+ids[1]) {
		t.Fatalf("dlq purge ID: %v\n%s", err, out)
	}
	_, _, err = run(t, base, "dlq", "list", "--state", "dead")
	if err == nil || !strings.Contains(err.Error(), "invalid_request (HTTP 400): state:") {
		t.Fatalf("bad filter error = %v", err)
	}
	// Every filter key has its flag: picked ids, and unacknowledged.
	out, _, err = run(t, base, "dlq", "purge", "--ids", ids[2], "--ids", strings.ToUpper(ids[3]), "--queue", "orders", "--header", "x=1",
		"--unacknowledged=false")
	if err != nil || !strings.Contains(out, "would delete 0 records") {
		t.Fatalf("dlq purge --ids --header: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "dlq", "purge", "--ids", ids[2], "--ids", strings.ToUpper(ids[3]), "--unacknowledged=false")
	if err != nil || !strings.Contains(out, "would delete 2 records") {
		t.Fatalf("dlq purge --ids: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "dlq", "list", "--queue", "orders", "--unacknowledged", "--limit", "5")
	if err != nil || strings.Contains(out, "orders") {
		t.Fatalf("dlq list --unacknowledged: %v\n%s", err, out)
	}
	if _, _, err = run(t, base, "dlq", "retry", "--all", "--since", "yesterday"); err == nil ||
		err.Error() != "--since: must be an RFC 3339 timestamp like 2026-02-13T10:00:00Z" {
		t.Fatalf("bad bulk filter error = %v", err)
	}
	out, _, err = run(t, "", "apikey", "new", "--name", "ops", "--scope", "read")
	if err != nil || !strings.Contains(out, "key:  rdk_") || !strings.Contains(out, `scope: read, sha256: `) {
		t.Fatalf("apikey new: %v\n%s", err, out)
	}
}

// dlq list shows previews of keys and values (the API lists no more), dlq
// get the whole record, and dlq raw its value or key as bytes.
func TestCLIPreviewsGetAndRaw(t *testing.T) {
	base, pool := cliServer(t)
	id := seedDiscarded(t, pool, "orders", 1)[0]
	value := append([]byte(`{"blob":"`), bytes.Repeat([]byte("x"), 100<<10)...)
	value = append(value, `"}`...)
	key := []byte{0xff, 0x00, 'k'}
	if _, err := pool.Exec(context.Background(), "UPDATE redrive_record_data SET value = $1, key = $2 WHERE id = $3", value, key, id); err != nil {
		t.Fatal(err)
	}

	out, _, err := run(t, base, "dlq", "list")
	if err != nil || !strings.Contains(out, "VALUE") || !strings.Contains(out, "100.0 KiB") || !strings.Contains(out, `{"blob":"xxx`) ||
		!strings.Contains(out, "…") || !strings.Contains(out, "base64:/wBr") || len(out) > 2000 {
		t.Fatalf("dlq list: %v\n%.3000s", err, out)
	}
	out, _, err = run(t, base, "dlq", "get", id)
	if err != nil || !strings.Contains(out, `"value": "{\"blob\":\"xxxx`) || len(out) < 100<<10 || !strings.Contains(out, `"value_truncated": false`) {
		t.Fatalf("dlq get: %v\n%.500s", err, out)
	}
	file := filepath.Join(t.TempDir(), "value.bin")
	_, errOut, err := run(t, base, "dlq", "raw", id, "--file", file)
	got, rerr := os.ReadFile(file)
	if err != nil || rerr != nil || !bytes.Equal(got, value) || !strings.Contains(errOut, fmt.Sprintf("wrote %d bytes", len(value))) {
		t.Fatalf("dlq raw --file: %v %v, %d bytes, %s", err, rerr, len(got), errOut)
	}
	out, _, err = run(t, base, "dlq", "raw", id, "--part", "key")
	if err != nil || out != string(key) {
		t.Fatalf("dlq raw --part key: %v %q", err, out)
	}
	missing := uuid.NewString()
	_, _, err = run(t, base, "dlq", "raw", missing)
	if err == nil || !strings.Contains(err.Error(), "not_found (HTTP 404)") {
		t.Fatalf("dlq raw of a missing record: %v", err)
	}
}

// `redrive topics` lists every topic, however many pages of the API that
// takes.
func TestTopicsListsEveryTopicAcrossPages(t *testing.T) {
	base, pool := cliServer(t)
	const n = 2_345
	now := testdate.Now().UTC()
	recs := make([]dlq.Record, n)
	for i := range recs {
		id := uuid.MustParse(dlq.NewID(testdate.Now()))
		q := fmt.Sprintf("topic-%04d", i)
		recs[i] = dlq.Record{ID: id.String(), Queue: q, State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter,
			Attempt: 3, MaxAttempts: 3, Format: dlq.FormatRedrive, Source: dlq.Source{Topic: q},
			DLQ:   dlq.Coord{Topic: "dead_letter_queue", Offset: int64(i)},
			Value: []byte(`{}`), Retry: json.RawMessage(`{}`), Meta: json.RawMessage(`{}`),
			Errors:    []dlq.ErrorEntry{{Attempt: 3, Type: "db.timeout", Message: "boom", Code: dlq.CodeRetry, OccurredAt: now}},
			CreatedAt: now, UpdatedAt: now, DiscardedAt: &now}
	}
	if _, err := store.New(pool).InsertRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, base, "topics")
	if err != nil {
		t.Fatalf("topics: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n+1 || !strings.HasPrefix(lines[1], "topic-0000 ") || !strings.HasPrefix(lines[n], "topic-2344 ") {
		t.Errorf("topics: %d lines, want a header and %d topics from topic-0000 to topic-2344", len(lines), n)
	}
	out, _, err = run(t, base, "topics", "-o", "json")
	var list struct {
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
	}
	if err != nil || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("topics -o json: %v\n%.300s", err, out)
	}
	seen := map[string]bool{}
	for _, q := range list.Items {
		seen[q.Name] = true
	}
	if len(list.Items) != n || len(seen) != n {
		t.Errorf("topics -o json: %d items, %d distinct, want %d", len(list.Items), len(seen), n)
	}
}
