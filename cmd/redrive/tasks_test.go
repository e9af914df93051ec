package main

import "testing"

// A task's line and row add up: what it processed, what it skipped and why,
// and what it left when it ended early make its total.
func TestTaskOutputAddsUp(t *testing.T) {
	task := func(state string, total, processed, remaining int64, reasons map[string]int64) taskView {
		v := taskView{ID: "t1", Kind: "retry", State: state, Total: total, Processed: processed, Remaining: remaining}
		for _, n := range reasons {
			v.Skipped.Count += n
		}
		v.Skipped.Reasons = reasons
		if total > 0 {
			v.Progress = float64(processed+v.Skipped.Count) / float64(total)
		}
		return v
	}
	for _, c := range []struct {
		t        taskView
		line     string
		progress string
	}{
		{task("completed", 39, 39, 0, nil), "39 of 39 records", "39/39 (100%)"},
		{task("completed", 72, 53, 0, map[string]int64{"no_longer_matches": 17, "in_flight": 2}),
			"53 of 72 records processed, 19 skipped (17 no longer matched the filter: retried, changed or deleted since the task was created; " +
				"2 were being redelivered when the task got to them)", "53/72, 19 skipped (100%)"},
		{task("cancelled", 100, 30, 70, nil), "30 of 100 records processed, 70 left as they were (cancelled before the task got to them)",
			"30/100 (30%)"},
		{task("aborted", 50, 10, 39, map[string]int64{"patch": 1}),
			"10 of 50 records processed, 1 skipped (1 failed the patch or, patched, their schema), 39 left as they were (aborted before the task got to them)",
			"10/50, 1 skipped (22%)"},
	} {
		if line := c.t.doneLine(); line != "task t1 "+c.t.State+": "+c.line {
			t.Errorf("%s task line:\n got %q\nwant %q", c.t.State, line, "task t1 "+c.t.State+": "+c.line)
		}
		if got := taskRow(c.t)[3]; got != c.progress {
			t.Errorf("%s task row: progress %q, want %q", c.t.State, got, c.progress)
		}
	}
}
