package policy

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A record's redrive.retry header is clamped into the limits, field by
// field, saying what changed: the forged header of issue 17 (1 ms
// intervals, 2,000,000,000 attempts) becomes 100 attempts a second apart.
func TestLimitsClamp(t *testing.T) {
	t.Parallel()
	forged, err := Default().WithOverride([]byte(`{"max_attempts":2000000000,"initial_interval":"PT0.001S","max_interval":"PT0.001S"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, notes := DefaultLimits().Clamp(forged)
	if got.MaxAttempts != 100 || got.InitialInterval != time.Second || got.MaxInterval != time.Second {
		t.Errorf("clamped = %+v", got)
	}
	want := []string{"max_attempts 2000000000 → 100", "initial_interval PT0.001S → PT1S", "max_interval PT0.001S → PT1S"}
	if !slices.Equal(notes, want) {
		t.Errorf("notes = %q, want %q", notes, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("clamped policy invalid: %v", err)
	}
	// Within the limits: unchanged, no notes.
	if got, notes := DefaultLimits().Clamp(Default()); len(notes) > 0 || got.MaxAttempts != 3 {
		t.Errorf("default policy clamped: %+v %q", got, notes)
	}
	// A zero Limits is the defaults; a floor above max_interval lifts it too.
	r := Default()
	r.InitialInterval, r.MaxInterval = 2*time.Second, 3*time.Second
	if got, _ := (Limits{MinInterval: 10 * time.Second}).Clamp(r); got.InitialInterval != 10*time.Second || got.MaxInterval != 10*time.Second || got.MaxAttempts != 3 {
		t.Errorf("clamped = %+v", got)
	}
}

// Policy files are checked against the limits a deployment configures: a
// ceiling and a floor of its own, and the system defaults when the limits
// pass them.
func TestLoadWithinLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, `topics:
  orders: {retry: {max_attempts: 300, initial_interval: PT0.1S, max_interval: PT1M}}
`)
	if _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), "max_attempts: must be at most 100") ||
		!strings.Contains(err.Error(), "initial_interval: must be at least PT1S") {
		t.Fatalf("default limits: %v", err)
	}
	set, err := Limits{MaxAttempts: 500, MinInterval: 100 * time.Millisecond}.LoadDir(dir)
	if err != nil {
		t.Fatalf("within 500 attempts and 100ms: %v", err)
	}
	if r := set.Resolve("orders", "").Retry; r.MaxAttempts != 300 || r.InitialInterval != 100*time.Millisecond {
		t.Errorf("orders = %+v", r)
	}
	// A floor above the system default initial_interval (PT1S) and a
	// ceiling below its max_attempts (3) need them set in _default.
	writeFile(t, dir, "topics:\n  orders: {max_age: P1D}\n")
	_, err = Limits{MaxAttempts: 2, MinInterval: 5 * time.Second}.LoadDir(dir)
	for _, want := range []string{
		"retry.initial_interval: the system default PT1S is below REDRIVE_RETRY_MIN_INTERVAL (PT5S); set it in _default",
		"retry.max_attempts: the system default 3 is above REDRIVE_RETRY_MAX_ATTEMPTS (2); set it in _default",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("floor 5s, ceiling 2: %v\nwant %q", err, want)
		}
	}
	writeFile(t, dir, `_default: {retry: {max_attempts: 2, initial_interval: PT5S}}
`)
	if _, err := (Limits{MaxAttempts: 2, MinInterval: 5 * time.Second}).LoadDir(dir); err != nil {
		t.Errorf("with _default set: %v", err)
	}
}

// A topic config set through the API is checked against the limits (and
// rate_limit against its minimum), each error naming its field; a stored
// config is applied as it is.
func TestApplyWithinLimits(t *testing.T) {
	t.Parallel()
	_, err := DecodeTopicSpec([]byte(`{"retry":{"max_attempts":2000000000,"initial_interval":"PT0.001S"},"redelivery":{"rate_limit":1e-300}}`))
	if err == nil || !strings.Contains(err.Error(), "redelivery.rate_limit: must be 0 (unlimited) or at least 0.001 records per second, got 1e-300") {
		t.Fatalf("DecodeTopicSpec: %v", err)
	}
	spec, err := DecodeTopicSpec([]byte(`{"retry":{"max_attempts":2000000000,"initial_interval":"PT0.001S","max_interval":"PT1S"}}`))
	if err != nil {
		t.Fatalf("DecodeTopicSpec (no limits when decoding): %v", err)
	}
	_, err = DefaultTopic().ApplyWithin(DefaultLimits(), "api", spec)
	for _, want := range []string{"retry.max_attempts: must be at most 100 (REDRIVE_RETRY_MAX_ATTEMPTS), got 2000000000",
		"retry.initial_interval: must be at least PT1S (REDRIVE_RETRY_MIN_INTERVAL), got PT0.001S"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ApplyWithin: %v\nwant %q", err, want)
		}
	}
	if _, err := (DefaultTopic()).ApplyWithin(Limits{MaxAttempts: 1 << 31, MinInterval: time.Millisecond}, "api", spec); err != nil {
		t.Errorf("ApplyWithin wider limits: %v", err)
	}
	if _, err := DefaultTopic().Apply("api", spec); err != nil {
		t.Errorf("Apply: %v", err)
	}
}
