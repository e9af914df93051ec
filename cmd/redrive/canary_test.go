package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// The CLI asks for a canary, shows it on the task, refuses a bad field with
// the API's message, and marks an incident "redrive when quiet".
func TestCLICanaryAndRedriveWhenQuiet(t *testing.T) {
	base, pool := cliServer(t)
	ids := seedDiscarded(t, pool, "orders", 40)

	out, _, err := run(t, base, "dlq", "retry", "--all", "--queue", "orders", "--canary-sample", "10%", "--canary-watch", "PT5M")
	if err != nil || out != "would retry 40 records, a canary of 4 records first; nothing changed (add --yes to retry them)\n" {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	_, _, err = run(t, base, "dlq", "retry", "--all", "--queue", "orders", "--canary-sample", "0", "--canary-watch", "PT5M", "--yes")
	if err == nil || !strings.Contains(err.Error(), "canary.sample: must be a number of records from 1 to 10000") {
		t.Fatalf("sample 0: %v", err)
	}
	_, _, err = run(t, base, "dlq", "retry", "--all", "--queue", "orders", "--canary-watch", "PT5M")
	if err == nil || err.Error() != "--canary-watch: needs --canary-sample" {
		t.Fatalf("a watch without a sample: %v", err)
	}
	out, _, err = run(t, base, "dlq", "retry", "--all", "--queue", "orders", "--canary-sample", "5", "--canary-watch", "PT5M", "--yes")
	if err != nil || !strings.HasPrefix(out, "task ") {
		t.Fatalf("retry with a canary: %v\n%s", err, out)
	}
	id := strings.Fields(out)[1]
	out, _, err = run(t, base, "tasks", "show", id)
	if err != nil || !strings.Contains(out, "CANARY") || !strings.Contains(out, "/5") {
		t.Fatalf("tasks show: %v\n%s", err, out)
	}

	const fp = "0123456789abcdef"
	if _, err := store.New(pool).RecordIncidents(context.Background(), []store.IncidentSeen{{Fingerprint: fp, ErrorType: "db.timeout",
		Signature: "boom", Queue: "orders", SeenAt: testdate.Now(), SampleID: ids[0], SampleMessage: "boom"}}); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, base, "incidents", "redrive-when-quiet", fp)
	if err == nil || !strings.Contains(err.Error(), "--quiet: required") {
		t.Fatalf("no --quiet: %v", err)
	}
	_, _, err = run(t, base, "incidents", "redrive-when-quiet", fp, "--quiet", "PT5S")
	if err == nil || !strings.Contains(err.Error(), "quiet: must be from PT1M to P7D") {
		t.Fatalf("--quiet PT5S: %v", err)
	}
	out, _, err = run(t, base, "incidents", "redrive-when-quiet", fp, "--quiet", "PT15M", "--sample", "20", "--watch", "PT2M")
	if err != nil || !strings.HasPrefix(out, "incident "+fp+": redrive when quiet for PT15M (by cli): a canary retry (sample 20, watch PT2M, abort at 0.1) starts at ") {
		t.Fatalf("redrive-when-quiet: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "incidents", "show", fp)
	if err != nil || !strings.Contains(out, "redrive when quiet for PT15M") {
		t.Fatalf("incidents show: %v\n%s", err, out)
	}
	out, _, err = run(t, base, "incidents", "redrive-when-quiet", fp, "--withdraw")
	if err != nil || out != "incident "+fp+": redrive-when-quiet withdrawn\n" {
		t.Fatalf("withdraw: %v\n%s", err, out)
	}
}
