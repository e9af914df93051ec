package store

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// The hand-written encoder says what json.Marshal says.
func TestAppendErrorsJSONMatchesMarshal(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	errs := []dlq.ErrorEntry{
		{Attempt: 1, Type: "db.down", Message: "dial tcp 10.0.0.5:5432: \"refused\"\n\ttab\\ \x01 <html> & é 😀", Code: dlq.CodeRetry, OccurredAt: at},
		{Attempt: 2, Type: "x", Code: dlq.CodeDeadLetter, Backtrace: []string{"main.f()", "\t/app/a.go:1"},
			Details: json.RawMessage(`{"a": [1, 2.5, "x"], "n": null}`), OccurredAt: at.In(time.FixedZone("X", 3600))},
		{},
	}
	want, err := json.Marshal(errs)
	if err != nil {
		t.Fatal(err)
	}
	got := appendErrorsJSON(nil, errs)
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
