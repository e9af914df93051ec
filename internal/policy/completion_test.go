package policy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// completion and ack_timeout are topic fields: the default completes a
// redelivered record when it is produced; a topic may wait for the client
// library's ack instead, for ack_timeout. They merge like any field, show in
// the effective policy's JSON and in explain, and the API takes them.
func TestCompletionPolicy(t *testing.T) {
	t.Parallel()
	set := loadYAML(t, `
_default: {ack_timeout: PT30M}
topics:
  payments: {completion: ack}
  "audit.*": {completion: ack, ack_timeout: PT2H}
  audit.eu: {completion: redelivered}
`)
	for _, tt := range []struct {
		topic   string
		want    Completion
		timeout time.Duration
	}{
		{"orders", CompletionRedelivered, 30 * time.Minute},
		{"payments", CompletionAck, 30 * time.Minute},
		{"audit.us", CompletionAck, 2 * time.Hour},
		{"audit.eu", CompletionRedelivered, 2 * time.Hour},
	} {
		got := set.Resolve(tt.topic, "any.type")
		if got.Completion != tt.want || got.AckTimeout != tt.timeout || got.AwaitsAck() != (tt.want == CompletionAck) {
			t.Errorf("%s: completion %q, ack_timeout %v; want %q, %v", tt.topic, got.Completion, got.AckTimeout, tt.want, tt.timeout)
		}
	}
	if d := DefaultTopic(); d.Completion != CompletionRedelivered || d.AckTimeout != time.Hour {
		t.Errorf("system defaults: completion %q, ack_timeout %v", d.Completion, d.AckTimeout)
	}

	b, err := json.Marshal(set.Resolve("payments", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"completion":"ack","ack_timeout":"PT30M"`)) {
		t.Errorf("effective policy JSON: %s", b)
	}
	// What the API shows, it takes back.
	spec, err := DecodeTopicSpec(b)
	if err != nil {
		t.Fatalf("DecodeTopicSpec(%s): %v", b, err)
	}
	if *spec.Completion != CompletionAck || spec.AckTimeout.Std() != 30*time.Minute {
		t.Errorf("decoded spec: %+v", spec)
	}
	if _, err := DecodeTopicSpec([]byte(`{"completion":"acked"}`)); err == nil ||
		!strings.Contains(err.Error(), `completion: must be one of redelivered, ack, got "acked"`) {
		t.Errorf("bad completion over the API: %v", err)
	}
	if _, err := DecodeTopicSpec([]byte(`{"ack_timeout":"1h"}`)); err == nil || !strings.Contains(err.Error(), `ack_timeout: invalid ISO 8601 duration "1h"`) {
		t.Errorf("bad ack_timeout over the API: %v", err)
	}

	var out bytes.Buffer
	if err := Explain(set.Resolve("payments", ""), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "completion                  ack (a redelivered record waits for the consumer's acknowledgement; unacknowledged after ack_timeout PT30M)") {
		t.Errorf("explain:\n%s", out.String())
	}
}

// "constant" is what most retry libraries (and the README) call a fixed
// delay: it is accepted as another name for none, and written back as none.
func TestConstantIsAnAliasOfNone(t *testing.T) {
	t.Parallel()
	r, err := ParseRetry([]byte(`{"backoff_strategy":"constant","initial_interval":"PT10S","max_interval":"PT10S","jitter":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.BackoffStrategy != StrategyNone || r.BaseDelay(1) != 10*time.Second || r.BaseDelay(5) != 10*time.Second {
		t.Errorf("constant: %+v", r)
	}
	b, _ := json.Marshal(r)
	if !bytes.Contains(b, []byte(`"backoff_strategy":"none"`)) {
		t.Errorf("written back as %s", b)
	}
	set := loadYAML(t, "topics: {polls: {retry: {backoff_strategy: constant}}}\n")
	if got := set.Resolve("polls", "").Retry.BackoffStrategy; got != StrategyNone {
		t.Errorf("policy file: backoff_strategy %q", got)
	}
}

// max_count: 0 turns the count limit off (the pruner has always read it so,
// and docs/operations.md says so); max_age still bounds every dead letter.
func TestMaxCountZeroTurnsTheCountLimitOff(t *testing.T) {
	t.Parallel()
	set := loadYAML(t, "topics: {ledger: {dead_letter: {retention: {max_count: 0}}}}\n")
	got := set.Resolve("ledger", "")
	if got.DeadLetter.Retention.MaxCount != 0 || got.DeadLetter.Retention.MaxAge != 180*day {
		t.Errorf("ledger retention: %+v", got.DeadLetter.Retention)
	}
	var out bytes.Buffer
	if err := Explain(got, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "max_age P180D, max_count 0 (no limit)") {
		t.Errorf("explain:\n%s", out.String())
	}
	if _, err := DecodeTopicSpec([]byte(`{"dead_letter":{"retention":{"max_age":"PT0S"}}}`)); err == nil {
		t.Error("dead_letter.retention.max_age PT0S accepted: dead letters would have no bound at all")
	}
}
