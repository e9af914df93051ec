package policy

import (
	"fmt"
	"strings"
	"time"
)

// Schedule is a topic's retry schedule before jitter, as data: what
// `redrive policy explain` prints as its delay table, and what the API shows
// for a queue or a record.
type Schedule struct {
	// Strategy is the backoff strategy (exponential, linear, none).
	Strategy string `json:"strategy"`
	// Rows are the retries, one per failed attempt, capped at 25.
	Rows []ScheduleRow `json:"rows"`
	// Notes follow the table: retries not shown, and how the schedule ends.
	Notes []string `json:"notes"`
}

// ScheduleRow is one retry: attempt Attempt fails, and NextAttempt runs
// Delay later, Cumulative after the first failure.
type ScheduleRow struct {
	Attempt     int    `json:"attempt"`
	NextAttempt int    `json:"next_attempt"`
	Delay       string `json:"delay"`      // ISO 8601
	Cumulative  string `json:"cumulative"` // ISO 8601, days split out
	// Note says when the delay is capped or the schedule outlives max_age.
	Note string `json:"note"`
}

// ScheduleOf computes t's retry schedule: every retry up to max_attempts,
// capped at 25 rows, with notes on the rest and on exhaustion. The work is
// bounded however many attempts the policy allows.
func ScheduleOf(t Topic) Schedule {
	r := t.Retry
	s := Schedule{Strategy: string(r.BackoffStrategy), Rows: []ScheduleRow{}, Notes: []string{}}
	retries := max(r.MaxAttempts-1, 0)
	if retries == 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("no retries: a failure is final and kept as %s", r.OnExhaustion))
		return s
	}
	var (
		total   time.Duration
		prev    time.Duration = -1
		n       int
		pastAge bool
	)
	for n = 1; n <= retries && n <= explainMaxSteps; n++ {
		d := r.BaseDelay(n)
		if d == prev && n > explainRows {
			break // constant from here on (capped, or a constant strategy): sum the rest at once
		}
		prev = d
		total = satAdd(total, d)
		if n <= explainRows {
			note := ""
			if d == r.MaxInterval && r.BackoffStrategy != StrategyNone {
				note = "capped at max_interval"
			}
			if t.MaxAge > 0 && total > t.MaxAge && !pastAge {
				pastAge = true
				note = strings.TrimPrefix(note+"; ", "; ") + fmt.Sprintf("past max_age: if attempt %d fails, it is not retried", n+1)
			}
			s.Rows = append(s.Rows, ScheduleRow{Attempt: n, NextAttempt: n + 1, Delay: FormatDuration(d),
				Cumulative: formatSpan(total), Note: note})
		}
	}
	approx := ""
	if n <= retries { // stopped early: the remaining retries are each >= prev
		rest := retries - n + 1
		total = satAdd(total, satMul(prev, rest))
		if n > explainMaxSteps {
			approx = "at least "
		}
	}
	if retries > explainRows {
		s.Notes = append(s.Notes, fmt.Sprintf("… %d more retries not shown (the last delay is %s)",
			retries-explainRows, FormatDuration(r.BaseDelay(retries))))
	}
	s.Notes = append(s.Notes, fmt.Sprintf("attempt %d fails: exhausted, kept as %s; %s%s from the first failure to exhaustion without jitter",
		r.MaxAttempts, r.OnExhaustion, approx, formatSpan(total)))
	return s
}
