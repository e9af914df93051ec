package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

func writePolicy(t *testing.T, dir, body string) {
	t.Helper()
	path := filepath.Join(dir, "topics.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// Distinct mtimes even on coarse file systems.
	future := time.Now().Add(time.Duration(len(body)) * time.Second)
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx, 10*time.Millisecond)

	writePolicy(t, dir, "topics:\n  orders:\n    retry: {max_attempts: 4, initial_interval: PT2S}\n")
	select {
	case <-reloaded:
	case <-time.After(10 * time.Second):
		t.Fatal("no reload after the file changed")
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
