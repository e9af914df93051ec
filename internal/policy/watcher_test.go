package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/testdate"
)

// writeFile writes body to dir as the policy file p.yaml.
func writeFile(t *testing.T, dir, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// loadYAML loads body as the one policy file of a directory.
func loadYAML(t *testing.T, body string) *Set {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, body)
	set, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func writePolicy(t *testing.T, dir, body string) {
	t.Helper()
	path := filepath.Join(dir, "topics.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// Distinct mtimes even on coarse file systems.
	future := testdate.Now().Add(time.Duration(len(body)) * time.Second)
	_ = os.Chtimes(path, future, future)
}

func TestWatcherKeepsLastGoodPoliciesOnBrokenReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePolicy(t, dir, "topics:\n  orders:\n    retry: {max_attempts: 7}\n")
	w, err := NewWatcher(dir, dlq.ReservedTopics{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Resolve("orders", "").Retry.MaxAttempts; got != 7 {
		t.Fatalf("max_attempts = %d, want 7", got)
	}

	writePolicy(t, dir, "topics:\n  orders:\n    retry: {max_atempts: 9}\n")
	err = w.Reload()
	if err == nil || !errors.Is(err, ErrInvalid) || w.LastError() == nil {
		t.Fatalf("reload of a broken file: err = %v", err)
	}
	if got := w.Resolve("orders", "").Retry.MaxAttempts; got != 7 {
		t.Fatalf("after a broken reload max_attempts = %d, want the last good 7", got)
	}

	writePolicy(t, dir, "topics:\n  orders:\n    retry: {max_attempts: 11}\n")
	if err := w.Reload(); err != nil || w.LastError() != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := w.Resolve("orders", "").Retry.MaxAttempts; got != 11 {
		t.Fatalf("max_attempts = %d, want 11", got)
	}
}

func TestWatcherReloadsOnFileChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePolicy(t, dir, "topics:\n  orders:\n    retry: {max_attempts: 2}\n")
	w, err := NewWatcher(dir, dlq.ReservedTopics{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan *Set, 1)
	w.OnReload(func(s *Set) { reloaded <- s })
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	poller := w.Poller(2*time.Second, clk)
	if err := poller.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = poller.Stop() }()

	writePolicy(t, dir, "topics:\n  orders:\n    retry: {max_attempts: 4, initial_interval: PT2S}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("the poller does not wait for its interval: %v", err)
	}
	select {
	case <-reloaded:
		t.Fatal("reloaded before the poll")
	default:
	}
	clk.Advance(2 * time.Second)
	select {
	case <-reloaded:
	case <-ctx.Done():
		t.Fatal("no reload at the poll after the file changed")
	}
	if got := w.Resolve("orders", "").Retry.MaxAttempts; got != 4 {
		t.Fatalf("max_attempts = %d, want 4", got)
	}
}

func TestWatcherRejectsABrokenDirectoryAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePolicy(t, dir, "_default: {retry: {backoff_strategy: fibonacci}}\n")
	if _, err := NewWatcher(dir, dlq.ReservedTopics{}, nil); err == nil {
		t.Fatal("want an error for an invalid policy directory")
	}
	if _, err := NewWatcher(filepath.Join(dir, "missing"), dlq.ReservedTopics{}, nil); err == nil {
		t.Fatal("want an error for a missing directory")
	}
}
