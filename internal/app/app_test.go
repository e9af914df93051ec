package app_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/apptest"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const dlqTopic = "dead_letter_queue"

type bundle struct {
	brokers []string
	base    string // http://host:port
	app     *app.App
}

// setup runs a whole processor against a fresh database and in-process Kafka.
// env overrides settings, as "NAME", "value" pairs.
func setup(t *testing.T, env ...string) *bundle {
	t.Helper()
	t.Parallel()
	// The archive and events topics exist, as in production: a scheduler or
	// archiver that stalled on a missing topic would hide a failure here.
	return start(t, kafkatest.New(t, dlqTopic, "orders", dlqTopic+".archive", dlqTopic+".events"), nil, env...)
}

// start runs a processor against brokers, logging to log (nil: the default logger).
func start(t *testing.T, brokers []string, log *slog.Logger, env ...string) *bundle {
	t.Helper()
	a, _ := apptest.Start(t, brokers, pgtest.URL(t), app.Options{Logger: log}, env...)
	return &bundle{brokers: brokers, base: "http://" + a.Addr(), app: a}
}

func (b *bundle) get(t *testing.T, path string, out any) int {
	t.Helper()
	resp, err := http.Get(b.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %d %s: %v", path, resp.StatusCode, body, err)
		}
	}
	return resp.StatusCode
}

type record struct {
	ID          string `json:"id"`
	Queue       string `json:"queue"`
	Type        string `json:"type"`
	State       string `json:"state"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	Format      string `json:"format"`
	Source      struct {
		Topic     string  `json:"topic"`
		Partition *int32  `json:"partition"`
		Offset    *int64  `json:"offset"`
		Timestamp *string `json:"timestamp"`
		Group     string  `json:"group"`
	} `json:"source"`
	DLQ struct {
		Topic string `json:"topic"`
	} `json:"dlq"`
	Key         string              `json:"key"`
	Value       string              `json:"value"`
	Payload     map[string]any      `json:"payload"`
	Headers     []map[string]string `json:"headers"`
	NextRetryAt *string             `json:"next_retry_at"`
	Errors      []struct {
		Attempt    int             `json:"attempt"`
		Type       string          `json:"type"`
		Message    string          `json:"message"`
		Code       string          `json:"code"`
		Backtrace  []string        `json:"backtrace"`
		Details    json.RawMessage `json:"details"`
		OccurredAt string          `json:"occurred_at"`
	} `json:"errors"`
}

type list struct {
	Items      []record `json:"items"`
	Pagination struct {
		Total      int    `json:"total"`
		HasMore    bool   `json:"has_more"`
		NextCursor string `json:"next_cursor"`
	} `json:"pagination"`
}

// waitFor polls the list endpoint until it returns exactly n records; more
// (a stored duplicate) fails at once.
func (b *bundle) waitFor(t *testing.T, query string, n int) list {
	t.Helper()
	var l list
	eventually.Nil(t, fmt.Sprintf("%d records at ?%s", n, query), func() error {
		l = list{}
		if status := b.get(t, "/ojs/v1/dead-letter?"+query, &l); status != http.StatusOK || len(l.Items) < n {
			return fmt.Errorf("GET: %d, %d records", status, len(l.Items))
		}
		if len(l.Items) > n {
			t.Fatalf("GET ?%s: %d records, want exactly %d", query, len(l.Items), n)
		}
		return nil
	})
	return l
}

func TestFailingHandlerRecordAppearsWithFullContext(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	producer := kafkatest.Client(t, b.brokers)
	ts := time.Date(2026, 2, 13, 10, 0, 0, 0, time.UTC)
	kafkatest.Produce(t, producer, &kgo.Record{
		Topic: "orders", Key: []byte("order-17"), Value: []byte(`{"id":17}`), Timestamp: ts,
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
			{Key: "ce_type", Value: []byte("order.created")}},
	})

	consumer := kafkatest.Client(t, b.brokers, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	dl, err := redrive.New(consumer)
	if err != nil {
		t.Fatal(err)
	}
	handle := dl.Wrap(func(context.Context, *kgo.Record) error {
		return redrive.Retry("db.connection_refused", errors.New("dial tcp 10.0.0.5:5432: connection refused"))
	})
	var src *kgo.Record
	for src == nil {
		fs := consumer.PollFetches(ctx)
		for _, r := range fs.Records() {
			if err := handle(ctx, r); err != nil {
				t.Fatalf("handler wrapper: %v", err)
			}
			if err := consumer.CommitRecords(ctx, r); err != nil {
				t.Fatal(err)
			}
			src = r
		}
	}

	got := b.waitFor(t, "queue=orders", 1).Items[0]
	if got.Queue != "orders" || got.Format != "redrive" || got.State != "retryable" || got.Attempt != 1 ||
		got.MaxAttempts != 3 || got.Type != "order.created" || got.DLQ.Topic != dlqTopic || got.NextRetryAt == nil {
		t.Errorf("record = %+v", got)
	}
	s := got.Source
	if s.Topic != "orders" || s.Partition == nil || *s.Partition != src.Partition || s.Offset == nil ||
		*s.Offset != src.Offset || s.Timestamp == nil || *s.Timestamp != "2026-02-13T10:00:00.000Z" || s.Group != "billing" {
		t.Errorf("source = %+v, want orders/%d/%d group billing", s, src.Partition, src.Offset)
	}
	if got.Key != "order-17" || got.Value != `{"id":17}` || got.Payload["id"] != float64(17) {
		t.Errorf("key/value/payload = %q %q %v", got.Key, got.Value, got.Payload)
	}
	if len(got.Headers) != 2 || got.Headers[0]["key"] != "traceparent" {
		t.Errorf("headers = %v, want the original two (no redrive.* envelope headers)", got.Headers)
	}
	if len(got.Errors) != 1 {
		t.Fatalf("errors = %+v", got.Errors)
	}
	e := got.Errors[0]
	if e.Attempt != 1 || e.Type != "db.connection_refused" || !strings.Contains(e.Message, "connection refused") ||
		e.Code != "RETRY" || len(e.Backtrace) == 0 || e.OccurredAt == "" {
		t.Errorf("error entry = %+v", e)
	}

	var one record
	if code := b.get(t, "/ojs/v1/dead-letter/"+got.ID, &one); code != http.StatusOK || one.ID != got.ID {
		t.Errorf("GET by id: %d %+v", code, one)
	}
}

// kcat produces with a real, non-Go client. Header values travel through argv,
// which cannot carry NUL bytes, so the Spring record's binary partition and
// offset are numbers whose big-endian encodings have none (realistic values
// are covered by the envelope package's tests).
func TestKcatSpringAndConnectRecordsAreDecoded(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is required (apt-get install kcat); .ci/run installs it")
	}
	b := setup(t)
	partition := make([]byte, 4)
	binary.BigEndian.PutUint32(partition, 0x01020304)
	offset := make([]byte, 8)
	binary.BigEndian.PutUint64(offset, 0x0102030405060708)
	kcat(t, b.brokers, `{"spring":true}`,
		"kafka_dlt-original-topic=payments",
		"kafka_dlt-original-partition="+string(partition),
		"kafka_dlt-original-offset="+string(offset),
		"kafka_dlt-original-consumer-group=payments-svc",
		"kafka_dlt-exception-fqcn=org.springframework.kafka.listener.ListenerExecutionFailedException",
		"kafka_dlt-exception-cause-fqcn=java.lang.IllegalStateException",
		"kafka_dlt-exception-message=Listener failed; nested exception is java.lang.IllegalStateException: boom",
		"kafka_dlt-exception-stacktrace=java.lang.IllegalStateException: boom\n\tat com.acme.Listener.on(Listener.java:42)")
	kcat(t, b.brokers, `{"connect":true}`,
		"__connect.errors.topic=inventory",
		"__connect.errors.partition=7",
		"__connect.errors.offset=123456",
		"__connect.errors.connector.name=jdbc-sink",
		"__connect.errors.exception.class.name=org.apache.kafka.connect.errors.DataException",
		"__connect.errors.exception.message=Converting byte[] to Kafka Connect data failed")

	spring := b.waitFor(t, "queue=payments", 1).Items[0]
	if spring.Format != "spring" || *spring.Source.Partition != 0x01020304 || *spring.Source.Offset != 0x0102030405060708 ||
		spring.Source.Group != "payments-svc" || spring.Errors[0].Type != "java.lang.IllegalStateException" {
		t.Errorf("spring record = %+v", spring)
	}
	connect := b.waitFor(t, "queue=inventory", 1).Items[0]
	if connect.Format != "connect" || *connect.Source.Partition != 7 || *connect.Source.Offset != 123456 ||
		connect.Errors[0].Type != "org.apache.kafka.connect.errors.DataException" || connect.Value != `{"connect":true}` {
		t.Errorf("connect record = %+v", connect)
	}
}

func kcat(t *testing.T, brokers []string, value string, headers ...string) {
	t.Helper()
	args := []string{"-P", "-b", brokers[0], "-t", dlqTopic}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	cmd := testdate.Command(t, "kcat", args...)
	cmd.Stdin = strings.NewReader(value + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v: %s", err, out)
	}
}

func TestAPIErrorsUseTheEnvelope(t *testing.T) {
	b := setup(t)
	cases := []struct {
		path   string
		status int
		code   string
		param  string
	}{
		{"/ojs/v1/dead-letter/not-a-uuid", 400, "invalid_request", "id"},
		{"/ojs/v1/dead-letter/01a20107-bc72-7d07-a136-944382c24f6e", 404, "not_found", ""},
		{"/ojs/v1/dead-letter?limit=0", 400, "invalid_request", "limit"},
		{"/ojs/v1/dead-letter?limit=1001", 400, "invalid_request", "limit"},
		{"/ojs/v1/dead-letter?state=dead", 400, "invalid_request", "state"},
		{"/ojs/v1/dead-letter?exhaustion=x", 400, "invalid_request", "exhaustion"},
		{"/ojs/v1/dead-letter?since=yesterday", 400, "invalid_request", "since"},
		{"/ojs/v1/dead-letter?since=2026-02-13T10:00:00Z&until=2026-02-12T10:00:00Z", 400, "invalid_request", "until"},
		{"/ojs/v1/dead-letter?cursor=" + url.QueryEscape("!!"), 400, "invalid_request", "cursor"},
		{"/ojs/v1/dead-letter?offset=-1", 400, "invalid_request", "offset"},
		{"/ojs/v1/dead-letter?colour=red", 400, "invalid_request", "colour"},
		{"/ojs/v1/nope", 404, "not_found", ""},
	}
	for _, c := range cases {
		var body struct {
			Error struct {
				Code      string         `json:"code"`
				Message   string         `json:"message"`
				Details   map[string]any `json:"details"`
				RequestID string         `json:"request_id"`
			} `json:"error"`
		}
		status := b.get(t, c.path, &body)
		if status != c.status || body.Error.Code != c.code || body.Error.RequestID == "" {
			t.Errorf("GET %s = %d %+v, want %d %s", c.path, status, body.Error, c.status, c.code)
		}
		if c.param != "" && (body.Error.Details["parameter"] != c.param || !strings.HasPrefix(body.Error.Message, c.param)) {
			t.Errorf("GET %s: error does not name %q: %+v", c.path, c.param, body.Error)
		}
	}
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	b := setup(t)
	if code := b.get(t, "/healthz", nil); code != http.StatusOK {
		t.Errorf("healthz = %d", code)
	}
	var ready struct {
		Checks map[string]string `json:"checks"`
	}
	if code := b.get(t, "/readyz", &ready); code != http.StatusOK || ready.Checks["postgres"] != "ok" || ready.Checks["kafka"] != "ok" {
		t.Errorf("readyz = %d %v", code, ready.Checks)
	}
	producer := kafkatest.Client(t, b.brokers)
	kafkatest.Produce(t, producer, &kgo.Record{Topic: dlqTopic, Value: []byte("junk")})
	b.waitFor(t, "", 1)
	// Ingest counts a batch once its offsets are committed, just after the
	// rows become visible: scrape until the count shows.
	want := fmt.Sprintf(`redrive_ingest_records_total{dlq_topic=%q,format="unparseable"} 1`, dlqTopic)
	var body []byte
	eventually.Nil(t, "the ingest metrics", func() error {
		resp, err := http.Get(b.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) || !strings.Contains(string(body), "redrive_ingest_batch_duration_seconds_bucket") {
			return fmt.Errorf("metrics lack %s:\n%s", want, body)
		}
		return nil
	}, eventually.Within(10*time.Second))
}
