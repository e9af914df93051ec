package queue_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
	"github.com/redrive/redrive/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestFilesWinAndTheAPILayersOverTheRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("topics:\n  payments: {retry: {max_attempts: 7}}\n  \"legacy.*\": {max_age: P1D}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := policy.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(pgtest.New(t))
	for name, cfg := range map[string]string{
		"payments":  `{"retry":{"max_attempts":99}}`, // shadowed by the file
		"invoices":  `{"retry":{"max_attempts":9},"state":"paused"}`,
		"_default":  `{"dead_letter":{"retention":{"max_count":500}}}`,
		"legacy.eu": `{"max_age":"P9D"}`, // shadowed by the file's glob
	} {
		if _, err := st.PutQueueConfig(ctx, name, json.RawMessage(cfg), false); err != nil {
			t.Fatal(err)
		}
	}
	r := queue.New(func() *policy.Set { return set }, st, nil)
	if got := r.Resolve("invoices", "").Retry.MaxAttempts; got != 3 {
		t.Errorf("before Refresh: max_attempts %d, want the defaults", got)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	inv := r.Resolve("invoices", "")
	if inv.Retry.MaxAttempts != 9 || inv.State != policy.TopicPaused || inv.DeadLetter.Retention.MaxCount != 500 {
		t.Errorf("invoices = %+v", inv)
	}
	pay := r.Resolve("payments", "")
	if pay.Retry.MaxAttempts != 7 || pay.DeadLetter.Retention.MaxCount != 10000 || r.DeclaredIn("payments") == "" {
		t.Errorf("payments = %+v (declared in %q)", pay, r.DeclaredIn("payments"))
	}
	if leg := r.Resolve("legacy.eu", ""); leg.MaxAge.Hours() != 24 || r.DeclaredIn("legacy.eu") == "" {
		t.Errorf("legacy.eu = %+v", leg)
	}
	if other := r.Resolve("anything", ""); other.DeadLetter.Retention.MaxCount != 500 || r.DeclaredIn(queue.DefaultName) != "" {
		t.Errorf("anything = %+v", other)
	}
	// A file with _default wins over the API's.
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("_default: {dead_letter: {retention: {max_count: 42}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if set, err = policy.LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	if got := r.Resolve("anything", "").DeadLetter.Retention.MaxCount; got != 42 || r.DeclaredIn(queue.DefaultName) == "" {
		t.Errorf("with a file _default: max_count %d", got)
	}
	if err := r.Validate("invoices", &policy.TopicSpec{Retry: &policy.RetrySpec{MaxAttempts: new(-1)}}); err == nil {
		t.Error("Validate accepted max_attempts -1")
	}
}
