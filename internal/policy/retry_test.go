package policy

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

const sec = time.Second

// mustRetry decodes a JSON OJS RetryPolicy onto the defaults, failing the test on error.
func mustRetry(t *testing.T, js string) Retry {
	t.Helper()
	r, err := ParseRetry([]byte(js))
	if err != nil {
		t.Fatalf("ParseRetry(%s): %v", js, err)
	}
	return r
}

// checkSchedule checks BaseDelay (and Delay without jitter) for retry numbers 1..len(want).
func checkSchedule(t *testing.T, r Retry, want []time.Duration) {
	t.Helper()
	noJitter := r
	noJitter.Jitter = false
	for i, w := range want {
		n := i + 1
		if got := r.BaseDelay(n); got != w {
			t.Errorf("BaseDelay(%d) = %v, want %v", n, got, w)
		}
		if got := noJitter.Delay(n, 0.99); got != w {
			t.Errorf("Delay(%d) without jitter = %v, want %v", n, got, w)
		}
	}
}

// Spec §3.1: none, initial_interval PT5S → 5s, 5s, 5s, 5s for attempts 2..5.
func TestBackoffNone(t *testing.T) {
	t.Parallel()
	r := mustRetry(t, `{"backoff_strategy":"none","initial_interval":"PT5S","max_attempts":5}`)
	checkSchedule(t, r, []time.Duration{5 * sec, 5 * sec, 5 * sec, 5 * sec})
}

// Spec §3.2: linear, initial_interval PT5S → 5s, 10s, 15s, 20s.
func TestBackoffLinear(t *testing.T) {
	t.Parallel()
	r := mustRetry(t, `{"backoff_strategy":"linear","initial_interval":"PT5S","backoff_coefficient":7}`)
	checkSchedule(t, r, []time.Duration{5 * sec, 10 * sec, 15 * sec, 20 * sec})
}

// Spec §3.3: exponential, PT1S, 2.0, capped at PT5M.
func TestBackoffExponential(t *testing.T) {
	t.Parallel()
	r := Default() // exponential is the default strategy; PT1S, 2.0, PT5M are the defaults
	checkSchedule(t, r, []time.Duration{1 * sec, 2 * sec, 4 * sec, 8 * sec, 16 * sec, 32 * sec, 64 * sec,
		128 * sec, 256 * sec, 300 * sec /* 512s capped */})
	// Far past the cap the float formula overflows to +Inf; the cap still holds.
	if got := r.BaseDelay(5000); got != 5*time.Minute {
		t.Errorf("BaseDelay(5000) = %v", got)
	}
}

// Spec §3.4: polynomial, PT1S, 4.0, capped at PT5M.
func TestBackoffPolynomial(t *testing.T) {
	t.Parallel()
	r := mustRetry(t, `{"backoff_strategy":"polynomial","backoff_coefficient":4.0}`)
	checkSchedule(t, r, []time.Duration{1 * sec, 16 * sec, 81 * sec, 256 * sec, 300 * sec /* 625s capped */})
}

// Appendix A, all four formulas with the same inputs, cap included.
func TestBackoffAppendixA(t *testing.T) {
	t.Parallel()
	base := Retry{InitialInterval: 3 * sec, BackoffCoefficient: 3, MaxInterval: 100 * sec}
	tests := []struct {
		strategy Strategy
		want     []time.Duration // n = 1..5
	}{
		{StrategyNone, []time.Duration{3 * sec, 3 * sec, 3 * sec, 3 * sec, 3 * sec}},
		{StrategyLinear, []time.Duration{3 * sec, 6 * sec, 9 * sec, 12 * sec, 15 * sec}},
		{StrategyExponential, []time.Duration{3 * sec, 9 * sec, 27 * sec, 81 * sec, 100 * sec}},
		{StrategyPolynomial, []time.Duration{3 * sec, 24 * sec, 81 * sec, 100 * sec, 100 * sec}},
		{"", []time.Duration{3 * sec, 9 * sec, 27 * sec, 81 * sec, 100 * sec}}, // unset: exponential
	}
	for _, tt := range tests {
		t.Run(string(tt.strategy), func(t *testing.T) {
			t.Parallel()
			r := base
			r.BackoffStrategy = tt.strategy
			checkSchedule(t, r, tt.want)
		})
	}
}

// §3.3: a coefficient of exactly 1.0 is valid and gives constant backoff.
func TestCoefficientOneIsConstant(t *testing.T) {
	t.Parallel()
	r := mustRetry(t, `{"backoff_coefficient":1.0,"initial_interval":"PT10S"}`)
	checkSchedule(t, r, []time.Duration{10 * sec, 10 * sec, 10 * sec})
}

// Spec §5.3: PT10S, 2.0, jitter on; jitter range [0.5D, 1.5D), capped again at max_interval.
func TestJitterSpecExample(t *testing.T) {
	t.Parallel()
	r := mustRetry(t, `{"initial_interval":"PT10S","backoff_coefficient":2.0,"jitter":true}`)
	tests := []struct {
		capped, lo, hi time.Duration // hi is exclusive unless capped
		hiCapped       bool
	}{
		{10 * sec, 5 * sec, 15 * sec, false},
		{20 * sec, 10 * sec, 30 * sec, false},
		{40 * sec, 20 * sec, 60 * sec, false},
		{80 * sec, 40 * sec, 120 * sec, false},
		{160 * sec, 80 * sec, 240 * sec, false},
		{300 * sec, 150 * sec, 300 * sec, true}, // [150s, 450s) → capped at [150s, 300s]
	}
	for i, tt := range tests {
		n := i + 1
		if got := r.BaseDelay(n); got != tt.capped {
			t.Errorf("BaseDelay(%d) = %v, want %v", n, got, tt.capped)
		}
		if got := r.Delay(n, 0); got != tt.lo {
			t.Errorf("Delay(%d, u=0) = %v, want %v", n, got, tt.lo)
		}
		if got := r.Delay(n, 0.5); got != min(tt.capped, r.MaxInterval) {
			t.Errorf("Delay(%d, u=0.5) = %v, want %v (mean)", n, got, tt.capped)
		}
		top := r.Delay(n, math.Nextafter(1, 0))
		if tt.hiCapped {
			if top != tt.hi {
				t.Errorf("Delay(%d, u→1) = %v, want %v (capped)", n, top, tt.hi)
			}
		} else if top >= tt.hi || top < tt.hi-time.Microsecond {
			t.Errorf("Delay(%d, u→1) = %v, want just under %v", n, top, tt.hi)
		}
	}
}

// RET-05/RET-06: over many samples the jittered delay stays in [0.5D, min(1.5D, max)).
func TestJitterBounds(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{1, 2, 3, 7, 999, 10 * sec, 4 * time.Minute, 5 * time.Minute} {
		r := Retry{InitialInterval: d, BackoffCoefficient: 1, MaxInterval: 5 * time.Minute, Jitter: true, BackoffStrategy: StrategyNone}
		for i := range 1000 {
			u := float64(i) / 1000
			got := r.Delay(1, u)
			lo := (d + 1) / 2
			if got < lo || got > r.MaxInterval || (d*3/2 < r.MaxInterval && float64(got) >= 1.5*float64(d)) {
				t.Fatalf("D=%v u=%v: Delay = %v outside [%v, min(1.5D, %v))", d, u, got, lo, r.MaxInterval)
			}
		}
		// Samples outside [0, 1) are clamped rather than trusted.
		for _, u := range []float64{-1, math.NaN(), 1, 2, math.Inf(1)} {
			if got := r.Delay(1, u); got < (d+1)/2 || got > r.MaxInterval {
				t.Errorf("D=%v u=%v: Delay = %v", d, u, got)
			}
		}
	}
}

// Spec §6.2 matching table.
func TestNonRetryableMatching(t *testing.T) {
	t.Parallel()
	r := mustRetry(t, `{"non_retryable_errors":["validation.payload_invalid","auth.*"]}`)
	tests := []struct {
		errType string
		want    bool
	}{
		{"validation.payload_invalid", true}, // exact
		{"validation.schema_error", false},
		{"auth.token_expired", true}, // prefix auth.*
		{"auth.forbidden", true},
		{"auth", false},                  // does not start with "auth."
		{"external.auth.failure", false}, // prefix is auth, not external.auth
		{"auth.", true},
		{"authz.denied", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := r.NonRetryable(tt.errType); got != tt.want {
			t.Errorf("NonRetryable(%q) = %v, want %v", tt.errType, got, tt.want)
		}
	}
}

// Spec §2.2 max_attempts table, RET-01.
func TestMaxAttemptsTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		maxAttempts int
		retried     []int // failed attempts that are retried
		final       int   // the failed attempt that exhausts
	}{
		{0, nil, 1},
		{1, nil, 1},
		{3, []int{1, 2}, 3},
		{25, seq(1, 24), 25},
	}
	for _, tt := range tests {
		r := Default()
		r.MaxAttempts = tt.maxAttempts
		for _, a := range tt.retried {
			if d := r.Decide(a, "x.y", dlq.CodeRetry, 0.5); d.State != dlq.StateRetryable || d.Reason != ReasonRetry {
				t.Errorf("max_attempts %d, attempt %d: %+v, want retryable", tt.maxAttempts, a, d)
			}
		}
		d := r.Decide(tt.final, "x.y", dlq.CodeRetry, 0.5)
		want := Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDiscard, Reason: ReasonExhausted}
		if d != want {
			t.Errorf("max_attempts %d, attempt %d: %+v, want %+v", tt.maxAttempts, tt.final, d, want)
		}
	}
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// Spec §7.2 precedence, RET-08, and §12.7's handler example.
func TestDecideHandlerCodes(t *testing.T) {
	t.Parallel()
	dl := mustRetry(t, `{"max_attempts":5,"on_exhaustion":"dead_letter","non_retryable_errors":["payment.card_stolen"]}`)
	disc := mustRetry(t, `{"max_attempts":5,"on_exhaustion":"discard"}`)
	tests := []struct {
		name    string
		r       Retry
		attempt int
		errType string
		code    dlq.Code
		want    Decision
	}{
		// §12.7
		{"declined card DISCARD", dl, 1, "payment.card_declined", dlq.CodeDiscard,
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDiscard, Reason: ReasonHandlerCode}},
		{"stolen card DEAD_LETTER", disc, 1, "payment.card_stolen", dlq.CodeDeadLetter,
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Reason: ReasonHandlerCode}},
		{"timeout RETRY", dl, 1, "external.timeout", dlq.CodeRetry,
			Decision{State: dlq.StateRetryable, Delay: dl.Delay(1, 0.3), Reason: ReasonRetry}},
		{"server error, no code", dl, 1, "external.server_error", "",
			Decision{State: dlq.StateRetryable, Delay: dl.Delay(1, 0.3), Reason: ReasonRetry}},
		// §7.2: codes beat max_attempts and on_exhaustion.
		{"DISCARD despite on_exhaustion dead_letter", dl, 1, "x", dlq.CodeDiscard,
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDiscard, Reason: ReasonHandlerCode}},
		{"DEAD_LETTER despite on_exhaustion discard", disc, 1, "x", dlq.CodeDeadLetter,
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Reason: ReasonHandlerCode}},
		// FAIL (§7.2 item 4): discarded regardless of max_attempts and on_exhaustion.
		{"FAIL despite on_exhaustion dead_letter", dl, 1, "x", dlq.CodeFail,
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDiscard, Reason: ReasonHandlerCode}},
		{"FAIL with on_exhaustion discard", disc, 1, "x", dlq.CodeFail,
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDiscard, Reason: ReasonHandlerCode}},
		{"DISCARD on the last attempt", dl, 5, "x", dlq.CodeDiscard,
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDiscard, Reason: ReasonHandlerCode}},
		// §7.2 item 3: RETRY still checks non_retryable_errors, then attempts.
		{"RETRY with a non-retryable type", dl, 1, "payment.card_stolen", dlq.CodeRetry,
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Reason: ReasonNonRetryable}},
		{"RETRY on the last attempt", dl, 5, "x", dlq.CodeRetry,
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Reason: ReasonExhausted}},
		{"unknown code applies the policy", dl, 2, "x", "SNOOZE",
			Decision{State: dlq.StateRetryable, Delay: dl.Delay(2, 0.3), Reason: ReasonRetry}},
	}
	for _, tt := range tests {
		if got := tt.r.Decide(tt.attempt, tt.errType, tt.code, 0.3); got != tt.want {
			t.Errorf("%s: Decide = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// Spec §8 and §12.2: the default policy, byte for byte in OJS shape.
func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	got, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"max_attempts":3,"initial_interval":"PT1S","backoff_coefficient":2.0,"max_interval":"PT5M",` +
		`"jitter":true,"non_retryable_errors":[],"on_exhaustion":"discard","backoff_strategy":"exponential"}`
	if string(got) != want {
		t.Errorf("Default() JSON =\n%s\nwant\n%s", got, want)
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate(): %v", err)
	}
	// §12.2: runs up to 3 times, delays before jitter 1s then 2s, then discarded.
	r := Default()
	checkSchedule(t, r, []time.Duration{sec, 2 * sec})
	if d := r.Decide(3, "email.smtp_down", dlq.CodeRetry, 0); d.State != dlq.StateDiscarded || d.Exhaustion != dlq.ExhaustionDiscard {
		t.Errorf("attempt 3: %+v", d)
	}
	// RET-09: an absent policy means the default.
	for _, empty := range []string{"", "  ", "null", "{}"} {
		if got, err := ParseRetry([]byte(empty)); err != nil || !reflect.DeepEqual(got, Default()) {
			t.Errorf("ParseRetry(%q) = %+v, %v; want Default()", empty, got, err)
		}
	}
}

// Spec §8.1 and the effective policies of §12.1 and §12.6: partial policies merge
// onto the defaults (RET-10).
func TestPartialMerge(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"§8.1", `{"max_attempts":10,"on_exhaustion":"dead_letter"}`,
			`{"max_attempts":10,"initial_interval":"PT1S","backoff_coefficient":2.0,"max_interval":"PT5M","jitter":true,"non_retryable_errors":[],"on_exhaustion":"dead_letter","backoff_strategy":"exponential"}`},
		{"§12.1 no retry", `{"max_attempts":1}`,
			`{"max_attempts":1,"initial_interval":"PT1S","backoff_coefficient":2.0,"max_interval":"PT5M","jitter":true,"non_retryable_errors":[],"on_exhaustion":"discard","backoff_strategy":"exponential"}`},
		{"§12.6 direct to dead letter", `{"max_attempts":1,"on_exhaustion":"dead_letter"}`,
			`{"max_attempts":1,"initial_interval":"PT1S","backoff_coefficient":2.0,"max_interval":"PT5M","jitter":true,"non_retryable_errors":[],"on_exhaustion":"dead_letter","backoff_strategy":"exponential"}`},
	}
	for _, tt := range tests {
		r := mustRetry(t, tt.in)
		got, _ := json.Marshal(r)
		if string(got) != tt.want {
			t.Errorf("%s: effective =\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
	// §12.1 behaviour: runs once, discarded; §12.6: runs once, dead-lettered.
	if d := mustRetry(t, `{"max_attempts":1}`).Decide(1, "analytics.x", "", 0); d.Exhaustion != dlq.ExhaustionDiscard || d.State != dlq.StateDiscarded {
		t.Errorf("§12.1: %+v", d)
	}
	if d := mustRetry(t, `{"max_attempts":1,"on_exhaustion":"dead_letter"}`).Decide(1, "compliance.x", "", 0); d.Exhaustion != dlq.ExhaustionDeadLetter {
		t.Errorf("§12.6: %+v", d)
	}

	// Merge layers: later wins per field; lists replace; nil spec is a no-op; no aliasing.
	base := Default()
	base.NonRetryableErrors = []string{"a.*"}
	two := 2
	m := base.Merge(&RetrySpec{MaxAttempts: &two})
	if m.MaxAttempts != 2 || !reflect.DeepEqual(m.NonRetryableErrors, []string{"a.*"}) {
		t.Errorf("merge: %+v", m)
	}
	m.NonRetryableErrors[0] = "mutated"
	if base.NonRetryableErrors[0] != "a.*" {
		t.Error("Merge aliases the base's non_retryable_errors")
	}
	if m := base.Merge(&RetrySpec{NonRetryableErrors: []string{}}); len(m.NonRetryableErrors) != 0 || m.NonRetryableErrors == nil {
		t.Errorf("non_retryable_errors: [] should clear the list, got %#v", m.NonRetryableErrors)
	}
	if m := base.Merge(nil); !reflect.DeepEqual(m, base) {
		t.Errorf("Merge(nil) = %+v", m)
	}
}

// Spec §12.3: payment.charge, polynomial, dead letter, non-retryable errors.
func TestSpecExamplePaymentCharge(t *testing.T) {
	t.Parallel()
	r := mustRetry(t, `{
	  "max_attempts": 25,
	  "initial_interval": "PT15S",
	  "backoff_coefficient": 4.0,
	  "backoff_strategy": "polynomial",
	  "max_interval": "PT1H",
	  "jitter": true,
	  "non_retryable_errors": ["payment.card_stolen", "payment.card_expired", "validation.*"],
	  "on_exhaustion": "dead_letter"
	}`)
	checkSchedule(t, r, []time.Duration{15 * sec, 240 * sec, 1215 * sec, 3600 * sec /* 3840s */, 3600 * sec /* 9375s */})
	dead := Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Reason: ReasonNonRetryable}
	for _, typ := range []string{"payment.card_stolen", "payment.card_expired", "validation.amount_negative", "validation.x.y"} {
		if got := r.Decide(1, typ, dlq.CodeRetry, 0.5); got != dead {
			t.Errorf("%s: %+v", typ, got)
		}
	}
	if got := r.Decide(24, "external.timeout", dlq.CodeRetry, 0.5); got.State != dlq.StateRetryable {
		t.Errorf("attempt 24: %+v", got)
	}
	if got := r.Decide(25, "external.timeout", dlq.CodeRetry, 0.5); got != (Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Reason: ReasonExhausted}) {
		t.Errorf("attempt 25: %+v", got)
	}
}

// Spec §12.4: CRM sync with custom non-retryable errors.
func TestSpecExampleCRM(t *testing.T) {
	t.Parallel()
	r := mustRetry(t, `{"max_attempts":5,"initial_interval":"PT30S","backoff_coefficient":2.0,"max_interval":"PT15M","jitter":true,
	  "non_retryable_errors":["auth.invalid_credentials","auth.account_suspended","resource.not_found","validation.*","external.crm.api_deprecated"],
	  "on_exhaustion":"dead_letter"}`)
	for _, typ := range []string{"auth.invalid_credentials", "resource.not_found", "validation.bad_email", "external.crm.api_deprecated"} {
		if d := r.Decide(1, typ, "", 0.5); d.State != dlq.StateDiscarded || d.Exhaustion != dlq.ExhaustionDeadLetter {
			t.Errorf("%s: %+v", typ, d)
		}
	}
	d := r.Decide(1, "external.crm.service_unavailable", "", 0.5)
	if d.State != dlq.StateRetryable || d.Delay != 30*sec {
		t.Errorf("503: %+v, want retry after 30s (u=0.5 is the mean)", d)
	}
	checkSchedule(t, r, []time.Duration{30 * sec, 60 * sec, 120 * sec, 240 * sec})
}

// Spec §12.5: constant backoff for polling.
func TestSpecExamplePolling(t *testing.T) {
	t.Parallel()
	r := mustRetry(t, `{"max_attempts":60,"initial_interval":"PT10S","backoff_coefficient":1.0,"max_interval":"PT10S","jitter":false,"non_retryable_errors":[],"on_exhaustion":"dead_letter"}`)
	var total time.Duration
	for a := 1; a < 60; a++ {
		d := r.Decide(a, "export.not_ready", dlq.CodeRetry, 0.9)
		if d.State != dlq.StateRetryable || d.Delay != 10*sec {
			t.Fatalf("attempt %d: %+v", a, d)
		}
		total += d.Delay
	}
	if total != 590*sec {
		t.Errorf("total retry window = %v", total)
	}
	if d := r.Decide(60, "export.not_ready", dlq.CodeRetry, 0.9); d.Exhaustion != dlq.ExhaustionDeadLetter {
		t.Errorf("attempt 60: %+v", d)
	}
}

// Spec §11 validation rules, each with a message naming the field (RET-16, RET-19, RET-20).
func TestRetryValidation(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, wantErr string }{
		{`{"max_attempts":-1}`, "retry.max_attempts: must be >= 0, got -1"},
		{`{"max_attempts":2.5}`, "retry.max_attempts: must be an integer, got number 2.5"},
		{`{"max_attempts":"3"}`, `retry.max_attempts: must be an integer, got string "3"`},
		{`{"max_attempts":null}`, "retry.max_attempts: must be an integer, got null"},
		{`{"max_attempts":99999999999999999999}`, "retry.max_attempts: must be an integer"},
		{`{"initial_interval":"1s"}`, `retry.initial_interval: invalid ISO 8601 duration "1s"`},
		{`{"initial_interval":1000}`, "retry.initial_interval: must be an ISO 8601 duration string such as PT30S or P7D, got integer 1000"},
		{`{"initial_interval":"PT0S"}`, "retry.initial_interval: must be greater than zero, got PT0S"},
		{`{"backoff_coefficient":0.5}`, "retry.backoff_coefficient: must be >= 1.0, got 0.5"},
		{`{"backoff_coefficient":"2"}`, `retry.backoff_coefficient: must be a number, got string "2"`},
		{`{"backoff_coefficient":1e308}`, "retry.backoff_coefficient: must be at most 100, got 1e+308"},
		{`{"max_interval":"P400D"}`, "retry.max_interval: must be at most P366D, got P400D"},
		{`{"initial_interval":"P367D","max_interval":"P367D"}`, "retry.initial_interval: must be at most P366D, got P367D"},
		{`{"max_interval":"P1M"}`, "retry.max_interval: invalid ISO 8601 duration \"P1M\": P1M means 1 months"},
		{`{"max_interval":"PT0S"}`, "retry.max_interval: must be greater than zero"},
		{`{"initial_interval":"PT10M","max_interval":"PT1M"}`, "retry.max_interval: must be >= initial_interval (PT10M), got PT1M"},
		{`{"jitter":"true"}`, `retry.jitter: must be a boolean (true or false), got string "true"`},
		{`{"jitter":1}`, "retry.jitter: must be a boolean (true or false), got integer 1"},
		{`{"non_retryable_errors":"auth.*"}`, `retry.non_retryable_errors: must be a list, got string "auth.*"`},
		{`{"non_retryable_errors":[1]}`, "retry.non_retryable_errors[0]: must be a string, got integer 1"},
		{`{"non_retryable_errors":["ok",""]}`, "retry.non_retryable_errors[1]: must not be empty"},
		{`{"non_retryable_errors":["*"]}`, `retry.non_retryable_errors[0]: "*": a wildcard is only allowed at the end, as "prefix.*"`},
		{`{"non_retryable_errors":["auth*"]}`, "wildcard is only allowed at the end"},
		{`{"non_retryable_errors":["a.*.b"]}`, "wildcard is only allowed at the end"},
		{`{"on_exhaustion":"archive"}`, `retry.on_exhaustion: must be one of discard, dead_letter, got "archive"`},
		{`{"backoff_strategy":"fibonacci"}`, `retry.backoff_strategy: must be one of exponential, polynomial, linear, none (or constant, the same as none), got "fibonacci"`},
		{`{"max_atempts":3}`, "retry.max_atempts: unknown field (did you mean max_attempts?)"},
		{`{"maxAttempts":3}`, "retry.maxAttempts: unknown field"},
		{`{"max_attempts":3,"max_attempts":4}`, "duplicate key"},
		{`{"max_attempts":3} {}`, "unexpected data after the JSON value"},
		{`[]`, "retry: must be a mapping, got a list"},
		{`{"max_attempts":`, "invalid JSON"},
	}
	for _, tt := range tests {
		_, err := ParseRetry([]byte(tt.in))
		if err == nil {
			t.Errorf("ParseRetry(%s) succeeded, want %q", tt.in, tt.wantErr)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseRetry(%s) =\n  %v\nwant it to contain\n  %s", tt.in, err, tt.wantErr)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRetry(%s): errors.Is(err, ErrInvalid) is false", tt.in)
		}
	}
	// Every problem is reported at once.
	_, err := ParseRetry([]byte(`{"max_attempts":-1,"backoff_coefficient":0,"on_exhaustion":"x","jitter":"no"}`))
	var es Errors
	if !errors.As(err, &es) || len(es) != 4 {
		t.Errorf("want 4 errors, got %v", err)
	}
	// A hand-built policy is checked the same way.
	bad := Retry{MaxAttempts: -2, InitialInterval: 0, BackoffCoefficient: math.NaN(), MaxInterval: -1, OnExhaustion: "x", BackoffStrategy: "y", NonRetryableErrors: []string{""}}
	err = bad.Validate()
	for _, want := range []string{"retry.max_attempts", "retry.initial_interval", "retry.backoff_coefficient", "retry.max_interval",
		"retry.non_retryable_errors[0]", "retry.on_exhaustion", "retry.backoff_strategy"} {
		if err == nil || !strings.Contains(err.Error(), want+":") {
			t.Errorf("Validate() = %v, want a problem with %s", err, want)
		}
	}
}

func TestRetryJSONRoundTrip(t *testing.T) {
	t.Parallel()
	r := mustRetry(t, `{"max_attempts":25,"initial_interval":"PT0.25S","backoff_coefficient":1.5,"max_interval":"P1D","jitter":false,
		"non_retryable_errors":["a.*","b"],"on_exhaustion":"dead_letter","backoff_strategy":"linear"}`)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"initial_interval":"PT0.25S"`) || !strings.Contains(string(b), `"max_interval":"P1D"`) ||
		!strings.Contains(string(b), `"backoff_coefficient":1.5`) {
		t.Errorf("JSON = %s", b)
	}
	var back Retry
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("round trip:\n%+v\n%+v", back, r)
	}
	// UnmarshalJSON is strict too.
	if err := json.Unmarshal([]byte(`{"max_attempts":-1}`), &back); err == nil {
		t.Error("json.Unmarshal into Retry accepted max_attempts -1")
	}
	// RetrySpec decodes strictly through encoding/json as part of a larger document.
	var body struct {
		Retry *RetrySpec `json:"retry"`
	}
	if err := json.Unmarshal([]byte(`{"retry":{"max_atempts":1}}`), &body); err == nil || !strings.Contains(err.Error(), "max_atempts: unknown field") {
		t.Errorf("nested RetrySpec: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"retry":{"max_attempts":4}}`), &body); err != nil || *body.Retry.MaxAttempts != 4 {
		t.Errorf("nested RetrySpec: %v", err)
	}
}

func TestWithOverride(t *testing.T) {
	t.Parallel()
	base := mustRetry(t, `{"max_attempts":5,"initial_interval":"PT1M","max_interval":"PT1H"}`)
	got, err := base.WithOverride([]byte(`{"max_attempts":2}`))
	if err != nil || got.MaxAttempts != 2 || got.InitialInterval != time.Minute {
		t.Errorf("override: %+v %v", got, err)
	}
	// A merged result that breaks a cross-field rule is rejected; the base is returned.
	got, err = base.WithOverride([]byte(`{"max_interval":"PT30S"}`))
	if err == nil || !strings.Contains(err.Error(), "retry.max_interval: must be >= initial_interval (PT1M), got PT30S") {
		t.Errorf("cross-field: %v", err)
	}
	if !reflect.DeepEqual(got, base) {
		t.Errorf("on error WithOverride returned %+v, want the base", got)
	}
}

// FuzzDecodeRetry: the decoder never panics; whatever it accepts and validates
// marshals back to JSON that decodes to the same policy, and deciding with it
// never panics either.
func FuzzDecodeRetry(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `{"max_attempts":10,"on_exhaustion":"dead_letter"}`,
		`{"max_attempts":25,"initial_interval":"PT15S","backoff_coefficient":4.0,"backoff_strategy":"polynomial","max_interval":"PT1H","non_retryable_errors":["payment.card_stolen","validation.*"]}`,
		`{"initial_interval":"PT0.5S","max_interval":"P1D","jitter":false}`,
		`{"max_attempts":-1}`, `{"max_atempts":1}`, `[1,2]`, `{"a":{"b":[null]}}`, `{"backoff_coefficient":1e308}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeRetry(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("DecodeRetry error is not ErrInvalid: %v", err)
			}
			return
		}
		r := Default().Merge(s)
		if r.Validate() != nil {
			return
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal %+v: %v", r, err)
		}
		back, err := ParseRetry(b)
		if err != nil {
			t.Fatalf("valid policy %s does not re-validate: %v", b, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip changed the policy:\n%+v\n%+v", r, back)
		}
		for _, a := range []int{-1, 0, 1, 2, 50, math.MaxInt32} {
			d := r.Decide(a, "x.y", "", 0.999)
			if d.State == dlq.StateRetryable && (d.Delay < 0 || d.Delay > r.MaxInterval) {
				t.Fatalf("attempt %d: delay %v outside [0, %v]", a, d.Delay, r.MaxInterval)
			}
		}
	})
}
