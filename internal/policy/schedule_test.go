package policy

import (
	"encoding/json"
	"testing"
)

// The schedule as data is what explain prints, field by field.
func TestScheduleOfAsJSON(t *testing.T) {
	t.Parallel()
	topic, err := DefaultTopic().Apply("test", mustTopicSpec(t, `{"max_age":"PT1M","retry":{"max_attempts":30,
		"initial_interval":"PT10S","max_interval":"PT40S","jitter":false,"on_exhaustion":"dead_letter"}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := ScheduleOf(topic)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Strategy string           `json:"strategy"`
		Rows     []map[string]any `json:"rows"`
		Notes    []string         `json:"notes"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Strategy != "exponential" || len(got.Rows) != 25 || len(got.Notes) != 2 {
		t.Fatalf("schedule = %s", b)
	}
	first := got.Rows[0]
	if first["attempt"] != 1.0 || first["next_attempt"] != 2.0 || first["delay"] != "PT10S" || first["cumulative"] != "PT10S" || first["note"] != "" {
		t.Errorf("row 1 = %v", first)
	}
	if r := got.Rows[2]; r["delay"] != "PT40S" || r["cumulative"] != "PT1M10S" ||
		r["note"] != "capped at max_interval; past max_age: if attempt 4 fails, it is not retried" {
		t.Errorf("row 3 = %v", r)
	}
	if got.Notes[0] != "… 4 more retries not shown (the last delay is PT40S)" ||
		got.Notes[1] != "attempt 30 fails: exhausted, kept as dead_letter; PT18M30S from the first failure to exhaustion without jitter" {
		t.Errorf("notes = %q", got.Notes)
	}

	none, _ := DefaultTopic().Apply("test", mustTopicSpec(t, `{"retry":{"max_attempts":1,"on_exhaustion":"dead_letter"}}`))
	b, _ = json.Marshal(ScheduleOf(none))
	if string(b) != `{"strategy":"exponential","rows":[],"notes":["no retries: a failure is final and kept as dead_letter"]}` {
		t.Errorf("no retries = %s", b)
	}
}
