package httpapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/apptest"
	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const dlqTopic = "dead_letter_queue"

// The keys every test server knows.
const (
	readKey  = "rdk_read_key_for_tests"
	writeKey = "rdk_write_key_for_tests"
	// botKey is a write key with unmask: false: it retries and edits
	// without seeing masked fields.
	botKey = "rdk_bot_key_for_tests"
)

// filePolicy declares topic payments in a policy file: read-only over the API.
const filePolicy = `topics:
  payments:
    retry: {max_attempts: 7}
  "legacy.*":
    max_age: P1D
`

type bundle struct {
	t       *testing.T
	base    string
	brokers []string
	dbURL   string
	store   *store.Store
	pool    *pgxpool.Pool
	app     *app.App
	stop    func() // stops the app and waits for it
	polDir  string
	keyFile string
}

type options struct {
	// dbURL reuses a database (a restart); brokers reuses a Kafka.
	dbURL   string
	brokers []string
	// env adds settings (REDRIVE_*).
	env map[string]string
	// policy replaces filePolicy.
	policy string
	// clock drives the app's services and the API's now (default: wall).
	clock clock.Clock
}

// setup runs a whole processor (ingest, scheduler, API, tasks) against a
// fresh database and an in-process Kafka, with API keys on.
func setup(t *testing.T) *bundle {
	t.Helper()
	t.Parallel()
	return start(t, options{})
}

func start(t *testing.T, o options) *bundle {
	t.Helper()
	brokers := o.brokers
	if brokers == nil {
		brokers = kafkatest.New(t, dlqTopic, dlqTopic+".archive", dlqTopic+".events", "orders", "payments", "billing", "orders.retry")
	}
	dbURL := o.dbURL
	if dbURL == "" {
		dbURL = pgtest.URL(t)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys.yaml")
	writeFile(t, keyFile, fmt.Sprintf("keys:\n  - {name: ops-read, scope: read, sha256: %s}\n  - {name: ops-write, scope: write, sha256: %s}\n"+
		"  - {name: ops-bot, scope: write, unmask: false, sha256: %s}\n", auth.Digest(readKey), auth.Digest(writeKey), auth.Digest(botKey)))
	polDir := filepath.Join(dir, "policies")
	if err := os.Mkdir(polDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(polDir, "topics.yaml"), cmp.Or(o.policy, filePolicy))
	env := []string{"REDRIVE_AUTH_DISABLED", "false", "REDRIVE_POLICIES_DIR", polDir, "REDRIVE_API_KEYS_FILE", keyFile}
	for _, k := range slices.Sorted(maps.Keys(o.env)) {
		env = append(env, k, o.env[k])
	}
	a, stop := apptest.Start(t, brokers, dbURL, app.Options{Logger: testLogger(), RequeueWait: 2 * time.Second, Clock: o.clock}, env...)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &bundle{t: t, base: "http://" + a.Addr(), brokers: brokers, dbURL: dbURL, store: store.New(pool), pool: pool,
		app: a, stop: stop, polDir: polDir, keyFile: keyFile}
}

// testLogger shows warnings and errors only (REDRIVE_TEST_LOG=debug for all).
func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("REDRIVE_TEST_LOG") == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ---- OpenAPI validation of every request and response ----

var (
	oaOnce   sync.Once
	oaRouter routers.Router
	oaErr    error
)

func openAPIRouter(t *testing.T) routers.Router {
	t.Helper()
	oaOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(api.OpenAPI)
		if err != nil {
			oaErr = fmt.Errorf("load openapi.yaml: %w", err)
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			oaErr = fmt.Errorf("openapi.yaml is invalid: %w", err)
			return
		}
		doc.Servers = nil // match any host: test servers listen on random ports
		oaRouter, oaErr = gorillamux.NewRouter(doc)
	})
	if oaErr != nil {
		t.Fatal(oaErr)
	}
	return oaRouter
}

// req is one API call.
type req struct {
	method, path string
	key          string // "" sends none; a value is sent as Bearer unless header says otherwise
	header       http.Header
	body         any // marshalled to JSON unless []byte or string
	rawBody      bool
}

// resp is an API answer.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, out any) {
	t.Helper()
	if err := json.Unmarshal(r.body, out); err != nil {
		t.Fatalf("decode %d %s: %v", r.status, r.body, err)
	}
}

// envelope is the OJS error envelope.
type envelope struct {
	Error struct {
		Code      string         `json:"code"`
		Message   string         `json:"message"`
		Details   map[string]any `json:"details"`
		RequestID string         `json:"request_id"`
	} `json:"error"`
}

func (r resp) err(t *testing.T) envelope {
	t.Helper()
	var e envelope
	r.json(t, &e)
	return e
}

var validated atomic.Int64

// do makes the call and validates the request (when it is meant to be valid,
// i.e. wantValid) and always the response against the OpenAPI document: an
// undocumented status or a body that does not match its schema fails the test.
func (b *bundle) do(t *testing.T, r req) resp {
	t.Helper()
	var body []byte
	switch v := r.body.(type) {
	case nil:
	case []byte:
		body = v
	case string:
		body = []byte(v)
	default:
		var err error
		if body, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	hreq, err := http.NewRequest(r.method, b.base+r.path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if (body != nil || r.method != http.MethodGet && r.method != http.MethodHead) && !r.rawBody {
		// Every write carries it, with a body or without (guardWrites).
		hreq.Header.Set("Content-Type", "application/json")
	}
	if r.key != "" {
		hreq.Header.Set("Authorization", "Bearer "+r.key)
	}
	for k, vs := range r.header {
		hreq.Header[k] = vs
	}
	hresp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer hresp.Body.Close()
	rb, _ := io.ReadAll(hresp.Body)
	out := resp{status: hresp.StatusCode, header: hresp.Header, body: rb}
	b.validate(t, r.method, r.path, hreq.Header, body, out)
	return out
}

func (b *bundle) validate(t *testing.T, method, path string, h http.Header, body []byte, out resp) {
	t.Helper()
	if method == http.MethodHead {
		return // HEAD answers as GET without the body; the document describes GET
	}
	vreq, _ := http.NewRequest(method, "http://localhost"+path, bytes.NewReader(body))
	vreq.Header = h.Clone()
	route, params, err := openAPIRouter(t).FindRoute(vreq)
	if err != nil {
		if out.status == http.StatusNotFound || out.status == http.StatusMethodNotAllowed {
			return // an unknown route is not in the document, rightly
		}
		t.Errorf("%s %s: not in the OpenAPI document: %v", method, path, err)
		return
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	if reqErr != nil && out.status < 400 {
		t.Errorf("%s %s: request accepted (%d) but invalid per the OpenAPI document: %v", method, path, out.status, reqErr)
	}
	rv := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: out.status, Header: out.header, Options: opts}
	rv.SetBodyBytes(out.body)
	if err := openapi3filter.ValidateResponse(context.Background(), rv); err != nil {
		t.Errorf("%s %s: response %d does not match the OpenAPI document: %v\n%s", method, path, out.status, err, out.body)
	}
	validated.Add(1)
}

// get, post, put, del are shorthands with the write key.
func (b *bundle) get(t *testing.T, path string, out any) resp {
	t.Helper()
	r := b.do(t, req{method: http.MethodGet, path: path, key: readKey})
	if out != nil && r.status == http.StatusOK {
		r.json(t, out)
	}
	return r
}

func (b *bundle) send(t *testing.T, method, path string, body any, out any) resp {
	t.Helper()
	r := b.do(t, req{method: method, path: path, key: writeKey, body: body})
	if out != nil && r.status < 300 {
		r.json(t, out)
	}
	return r
}

func wantStatus(t *testing.T, r resp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
}

// wantError checks an error envelope: status, code, and the field it names.
func wantError(t *testing.T, what string, r resp, status int, code, field string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d: %s", what, r.status, status, r.body)
		return
	}
	e := r.err(t)
	if e.Error.Code != code || e.Error.RequestID == "" {
		t.Errorf("%s: error %+v, want code %s with a request id", what, e.Error, code)
	}
	if field != "" && e.Error.Details["parameter"] != field {
		t.Errorf("%s: error names %v, want %q: %s", what, e.Error.Details["parameter"], field, e.Error.Message)
	}
}

// ---- seeding records ----

var dlqOffset atomic.Int64

// rec is a record to seed; zero fields take defaults.
type rec struct {
	queue, typ, errType string
	state               dlq.State
	exhaustion          dlq.Exhaustion
	key                 string
	value               string
	headers             map[string]string
	createdAt           time.Time
	nextRetryAt         *time.Time
	// valueSchema and payload: a value decoded from the Schema Registry
	// wire format, as ingest stores it.
	valueSchema *dlq.SchemaRef
	payload     string
}

func (b *bundle) seed(t *testing.T, rs ...rec) []string {
	t.Helper()
	now := testdate.Now().UTC()
	records := make([]dlq.Record, len(rs))
	ids := make([]string, len(rs))
	def, _ := json.Marshal(policy.Default())
	for i, r := range rs {
		id := uuid.MustParse(dlq.NewID(testdate.Now()))
		ids[i] = id.String()
		rec := dlq.Record{ID: id.String(), Queue: r.queue, Type: r.typ, State: r.state, Exhaustion: r.exhaustion,
			Attempt: 3, MaxAttempts: 3, Format: dlq.FormatRedrive,
			Source: dlq.Source{Topic: r.queue, Partition: 0, Offset: int64(i)},
			DLQ:    dlq.Coord{Topic: dlqTopic, Partition: 0, Offset: dlqOffset.Add(1)},
			Value:  []byte(r.value), Retry: def, Meta: json.RawMessage(`{}`),
			CreatedAt: r.createdAt, UpdatedAt: now}
		if rec.Queue == "" {
			rec.Queue = "orders"
		}
		if rec.State == "" {
			rec.State = dlq.StateDiscarded
		}
		if rec.State == dlq.StateDiscarded {
			rec.DiscardedAt = &now
			if rec.Exhaustion == "" {
				rec.Exhaustion = dlq.ExhaustionDeadLetter
			}
		}
		if rec.State == dlq.StateRetryable {
			later := now.Add(time.Hour)
			rec.NextRetryAt = &later
			if r.nextRetryAt != nil {
				rec.NextRetryAt = r.nextRetryAt
			}
		}
		if rec.State == dlq.StateCompleted {
			rec.CompletedAt = &now
		}
		if rec.CreatedAt.IsZero() {
			rec.CreatedAt = now
		}
		if r.key != "" {
			rec.Key = []byte(r.key)
		}
		if r.valueSchema != nil {
			rec.ValueSchema, rec.Payload = r.valueSchema, json.RawMessage(r.payload)
		}
		if r.value == "" {
			rec.Value = fmt.Appendf(nil, `{"n":%d}`, i)
		}
		for k, v := range r.headers {
			rec.Headers = append(rec.Headers, dlq.Header{Key: k, Value: []byte(v)})
		}
		et := r.errType
		if et == "" {
			et = "db.timeout"
		}
		rec.Errors = []dlq.ErrorEntry{{Attempt: 1, Type: et, Message: "first", Code: dlq.CodeRetry, OccurredAt: now.Add(-time.Minute)},
			{Attempt: 3, Type: et, Message: "boom", Code: dlq.CodeRetry, Backtrace: []string{"at x.go:1"}, OccurredAt: now}}
		records[i] = rec
	}
	for start := 0; start < len(records); start += 5000 {
		end := min(start+5000, len(records))
		if _, err := b.store.InsertRecords(context.Background(), records[start:end]); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// recordJSON is the subset of a record the tests read.
type recordJSON struct {
	ID            string           `json:"id"`
	Queue         string           `json:"queue"`
	Type          string           `json:"type"`
	State         string           `json:"state"`
	Exhaustion    *string          `json:"exhaustion"`
	Attempt       int              `json:"attempt"`
	MaxAttempts   int              `json:"max_attempts"`
	Key           *string          `json:"key"`
	Value         *string          `json:"value"`
	Headers       []map[string]any `json:"headers"`
	Errors        []map[string]any `json:"errors"`
	Retry         map[string]any   `json:"retry"`
	Meta          map[string]any   `json:"meta"`
	EnqueuedAt    *string          `json:"enqueued_at"`
	NextRetryAt   *string          `json:"next_retry_at"`
	DiscardedAt   *string          `json:"discarded_at"`
	RedeliveredAt *string          `json:"redelivered_at"`
	Redelivery    *struct {
		Queue         *string          `json:"queue"`
		Headers       []map[string]any `json:"headers"`
		Value         *string          `json:"value"`
		ValueEncoding *string          `json:"value_encoding"`
	} `json:"redelivery"`
}

type listJSON struct {
	Items      []recordJSON `json:"items"`
	Pagination struct {
		Total          int    `json:"total"`
		TotalCapped    bool   `json:"total_capped"`
		TotalEstimated bool   `json:"total_estimated"`
		Limit          int    `json:"limit"`
		HasMore        bool   `json:"has_more"`
		NextCursor     string `json:"next_cursor"`
	} `json:"pagination"`
}

// itemIDs are the ids of l's items, in order.
func (l *listJSON) itemIDs() []string {
	var out []string
	for _, it := range l.Items {
		out = append(out, it.ID)
	}
	return out
}

// pick is ids[i] for each i of is, in order.
func pick(ids []string, is []int) []string {
	var out []string
	for _, i := range is {
		out = append(out, ids[i])
	}
	return out
}

type taskJSON struct {
	ID              string  `json:"id"`
	Kind            string  `json:"kind"`
	State           string  `json:"state"`
	Total           int64   `json:"total"`
	Processed       int64   `json:"processed"`
	Progress        float64 `json:"progress"`
	CancelRequested bool    `json:"cancel_requested"`
	CreatedBy       string  `json:"created_by"`
	Errors          []any   `json:"errors"`
}

func (b *bundle) task(t *testing.T, id string) taskJSON {
	t.Helper()
	var tj taskJSON
	wantStatus(t, b.get(t, "/ojs/v1/tasks/"+id, &tj), http.StatusOK)
	return tj
}

func (b *bundle) waitTask(t *testing.T, id, state string, timeout time.Duration) taskJSON {
	t.Helper()
	var tj taskJSON
	eventually.True(t, "task "+id+" "+state, func() bool {
		tj = b.task(t, id)
		return tj.State == state
	}, eventually.Within(timeout))
	return tj
}

// oneAttempt gives queues an API config of one attempt, after which a
// failure is a dead letter.
func (b *bundle) oneAttempt(t *testing.T, queues ...string) {
	t.Helper()
	for _, q := range queues {
		wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/"+q+"/config",
			map[string]any{"retry": map[string]any{"max_attempts": 1, "on_exhaustion": "dead_letter"}}, nil), http.StatusOK)
	}
}

// itemsBy GETs the list at path and returns its items by key.
func itemsBy[T any](t *testing.T, b *bundle, path string, key func(T) string) map[string]T {
	t.Helper()
	var list struct {
		Items []T `json:"items"`
	}
	wantStatus(t, b.get(t, path, &list), http.StatusOK)
	by := map[string]T{}
	for _, it := range list.Items {
		by[key(it)] = it
	}
	return by
}

// count counts records in the database directly.
func (b *bundle) count(t *testing.T, where string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM redrive_record WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
