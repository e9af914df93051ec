package policy

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// explainRows caps the delay schedule table; a policy with more retries gets a
// summary line instead of pages of identical capped rows.
const explainRows = 25

// explainMaxSteps bounds the work spent summing a schedule: a coefficient barely
// above 1 can take millions of steps to reach max_interval.
const explainMaxSteps = 100_000

// Explain writes the effective policy t for humans, as `redrive policy explain`
// prints it: where it came from, every field, and the delay schedule (attempt n
// fails → delay before attempt n+1 without jitter → cumulative time since the
// first failure) for every retry up to max_attempts, capped at 25 rows.
func Explain(t Topic, w io.Writer) error { return ExplainIn(t, nil, w) }

// ExplainIn is Explain that also says, for each ingest filter with a
// when_env, whether it applies in environment *env (REDRIVE_ENVIRONMENT);
// nil env says nothing about it.
func ExplainIn(t Topic, env *string, w io.Writer) error {
	var buf bytes.Buffer
	if err := explain(t, env, &buf); err != nil {
		return fmt.Errorf("explain policy: %w", err)
	}
	// tabwriter pads the last cell of short rows; drop the trailing blanks.
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return fmt.Errorf("explain policy: %w", err)
		}
	}
	return nil
}

func explain(t Topic, env *string, w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	r := t.Retry

	row("topic", orNone(t.Name, "(any)"))
	if t.Type != "" {
		row("type", t.Type)
	}
	if t.DeclaredIn != "" {
		row("declared in", fmt.Sprintf("%s (topics entry %q; read-only over the API)", t.DeclaredIn, t.Pattern))
	} else {
		row("declared in", "(no topics entry; editable over the API)")
	}
	row("merged", joinLayers(t.Layers))
	row("state", t.State)
	if t.MaxAge > 0 {
		row("max_age", FormatDuration(t.MaxAge)+" (failures older than this are not retried)")
	} else {
		row("max_age", "none (PT0S)")
	}
	row("retry.max_attempts", fmt.Sprintf("%d (executions, the original consumption included)", r.MaxAttempts))
	row("retry.backoff_strategy", r.BackoffStrategy)
	row("retry.initial_interval", FormatDuration(r.InitialInterval))
	coefJSON, _ := jsonFloat(r.BackoffCoefficient).MarshalJSON()
	coef := string(coefJSON)
	if r.BackoffStrategy == StrategyLinear || r.BackoffStrategy == StrategyNone {
		coef += " (ignored by this strategy)"
	}
	row("retry.backoff_coefficient", coef)
	row("retry.max_interval", FormatDuration(r.MaxInterval))
	if r.Jitter {
		row("retry.jitter", "true (each delay × uniform [0.5, 1.5), capped at max_interval)")
	} else {
		row("retry.jitter", "false")
	}
	row("retry.non_retryable_errors", orNone(strings.Join(r.NonRetryableErrors, ", "), "none"))
	row("retry.on_exhaustion", r.OnExhaustion)
	count := strconv.Itoa(t.DeadLetter.Retention.MaxCount)
	if t.DeadLetter.Retention.MaxCount == 0 {
		count = "0 (no limit)"
	}
	row("dead_letter.retention", fmt.Sprintf("max_age %s, max_count %s", FormatDuration(t.DeadLetter.Retention.MaxAge), count))
	row("retention", fmt.Sprintf("discarded %s, completed %s, cancelled %s",
		FormatDuration(t.Retention.Discarded), FormatDuration(t.Retention.Completed), FormatDuration(t.Retention.Cancelled)))
	row("pruning_policy", t.PruningPolicy)
	rate := "unlimited"
	if t.Redelivery.RateLimit > 0 {
		rate = strconv.FormatFloat(t.Redelivery.RateLimit, 'f', -1, 64) + " records/s"
	}
	row("redelivery", fmt.Sprintf("rate_limit %s, target_topic %s, keep_partition %t, mode %s, target %s",
		rate, orNone(t.Redelivery.TargetTopic, "(source topic)"), t.Redelivery.KeepPartition, t.Redelivery.Mode, t.Redelivery.Target))
	if t.AwaitsAck() {
		row("completion", fmt.Sprintf("ack (a redelivered record waits for the consumer's acknowledgement; unacknowledged after ack_timeout %s)",
			FormatDuration(t.AckTimeout)))
	} else {
		row("completion", "redelivered (a record is completed once it is produced back; a repeat failure re-opens it)")
	}
	explainIngestRules(t, env, row)
	explainMasking(t.Masking, row)
	if len(t.ReplayRules) == 0 {
		row("replay_rules", "none")
	}
	for _, rr := range t.ReplayRules {
		state := "enabled"
		if !rr.Enabled {
			state = "disabled"
		}
		filter := rr.Filter.Canonical()
		row("replay_rules."+rr.Name, fmt.Sprintf("%s, delay %s, max_replays %d, filter %s",
			state, FormatDuration(rr.Delay), rr.MaxReplays, filter))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return explainSchedule(t, w)
}

// explainSchedule prints ScheduleOf(t): the table, then its notes.
func explainSchedule(t Topic, w io.Writer) error {
	s := ScheduleOf(t)
	fmt.Fprintf(w, "\nretry schedule (%s, before jitter):\n", s.Strategy)
	if len(s.Rows) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  attempt fails\tnext attempt\tdelay\tcumulative\tnote")
		for _, r := range s.Rows {
			fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%s\n", r.Attempt, r.NextAttempt, r.Delay, r.Cumulative, r.Note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, n := range s.Notes {
		if _, err := fmt.Fprintf(w, "  %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// formatSpan writes a long span of time in ISO 8601 with days split out
// (P1DT1H rather than PT25H), which reads better for cumulative times.
func formatSpan(d time.Duration) string {
	switch {
	case d == math.MaxInt64:
		return "over 292 years"
	case d < day || d%day == 0:
		return FormatDuration(d)
	}
	return fmt.Sprintf("P%dD%s", d/day, FormatDuration(d % day)[1:])
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(d time.Duration, n int) time.Duration {
	if d > 0 && int64(n) > int64(math.MaxInt64)/int64(d) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}
