package policy

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/testdate"
)

var update = flag.Bool("update", false, "rewrite testdata/explain/*.golden")

func TestExplainGolden(t *testing.T) {
	t.Parallel()
	design, err := LoadFiles("testdata/design.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	split, err := LoadDir("testdata/dirs/split")
	if err != nil {
		t.Fatal(err)
	}
	apply := func(base Topic, js string) Topic {
		t.Helper()
		out, err := base.Apply("test", mustTopicSpec(t, js))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	tests := []struct {
		name  string
		topic Topic
	}{
		{"system_defaults", (*Set)(nil).Resolve("clicks", "")},
		{"payment_charge", design.Resolve("payment.charge", "")},
		{"orders_refund_type", design.Resolve("orders.eu", "order.refund")},
		{"split_exact_over_glob", split.Resolve("orders.eu.archive", "order.refund")},
		// More retries than rows: the table stops at 25 and says what follows.
		{"polling_60_attempts", apply(DefaultTopic(), `{"retry":{"max_attempts":60,"initial_interval":"PT10S",
			"backoff_coefficient":1.0,"max_interval":"PT10S","jitter":false,"on_exhaustion":"dead_letter"}}`)},
		// The schedule outlives max_age.
		{"past_max_age", apply(DefaultTopic(), `{"max_age":"PT1M","retry":{"max_attempts":9}}`)},
		{"no_retry", apply(DefaultTopic(), `{"retry":{"max_attempts":1,"on_exhaustion":"dead_letter"}}`)},
		{"linear_capped", apply(DefaultTopic(), `{"retry":{"max_attempts":40,"backoff_strategy":"linear","initial_interval":"PT30S","max_interval":"PT5M"}}`)},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := Explain(tt.topic, &buf); err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", "explain", tt.name+".golden")
		if *update {
			if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -run TestExplainGolden -update)", err)
		}
		if buf.String() != string(want) {
			t.Errorf("%s: Explain output differs from %s:\n%s", tt.name, golden, buf.String())
		}
	}
}

func TestExplainSummarisesHugeSchedules(t *testing.T) {
	t.Parallel()
	topic, err := DefaultTopic().Apply("test", mustTopicSpec(t,
		`{"retry":{"max_attempts":2000000000,"backoff_coefficient":1.000001,"initial_interval":"PT1S","max_interval":"PT1H"}}`))
	if err != nil {
		t.Fatal(err)
	}
	start := testdate.Now()
	var buf bytes.Buffer
	if err := Explain(topic, &buf); err != nil {
		t.Fatal(err)
	}
	if d := testdate.Since(start); d > 2*time.Second {
		t.Errorf("Explain took %v", d)
	}
	out := buf.String()
	for _, want := range []string{"… 1999999974 more retries not shown (the last delay is PT1H)", "attempt 2000000000 fails: exhausted", "at least"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A constant schedule is summed at once, exactly.
	for attempts, want := range map[string]string{
		"1000001":    "; P41666DT16H from the first failure", // 10^6 hours
		"1000000000": "; over 292 years from the first failure",
	} {
		topic, _ = DefaultTopic().Apply("test", mustTopicSpec(t, `{"retry":{"max_attempts":`+attempts+`,"backoff_strategy":"none","initial_interval":"PT1H","max_interval":"PT1H"}}`))
		buf.Reset()
		_ = Explain(topic, &buf)
		if !strings.Contains(buf.String(), want) {
			t.Errorf("constant schedule total, %s attempts:\n%s", attempts, buf.String())
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestExplainReportsWriteErrors(t *testing.T) {
	t.Parallel()
	err := Explain(DefaultTopic(), failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "explain policy: disk full") {
		t.Errorf("Explain = %v", err)
	}
}
