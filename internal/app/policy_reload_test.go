package app_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/testdate"
)

func writePolicies(t *testing.T, dir, body string) {
	t.Helper()
	path := filepath.Join(dir, "topics.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// A distinct modification time even where the clock is coarse.
	at := testdate.Now().Add(time.Duration(len(body)) * time.Second)
	_ = os.Chtimes(path, at, at)
}

// policyDir returns a new policy directory holding body (writePolicies).
func policyDir(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	writePolicies(t, dir, body)
	return dir
}

func TestSIGHUPWithABrokenPolicyFileKeepsTheLastGoodPolicies(t *testing.T) {
	dir := t.TempDir()
	writePolicies(t, dir, "topics:\n  orders: {retry: {max_attempts: 7}}\n")
	b := setup(t, "REDRIVE_POLICIES_DIR", dir)
	w := b.app.Policies()
	if got := w.Resolve("orders", "").Retry.MaxAttempts; got != 7 {
		t.Fatalf("max_attempts = %d, want 7", got)
	}

	writePolicies(t, dir, "topics:\n  orders: {retry: {max_attempts: 9, backoff_strategy: fibonacci}}\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the failed reload", func() bool { return w.LastError() != nil })
	if got := w.Resolve("orders", "").Retry.MaxAttempts; got != 7 {
		t.Fatalf("after a broken reload max_attempts = %d, want the last good 7", got)
	}

	writePolicies(t, dir, "topics:\n  orders: {retry: {max_attempts: 11}}\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the good reload", func() bool { return w.LastError() == nil && w.Resolve("orders", "").Retry.MaxAttempts == 11 })
}
