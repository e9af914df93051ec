package store_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// Open turns JIT compilation off for its sessions (a claim over the weekly
// partitions was estimated past jit_above_cost and compiled for 2.6 s),
// unless the database url sets jit itself.
func TestOpenTurnsJITOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.URL(t)
	with := func(t *testing.T, param, value string) string {
		t.Helper()
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set(param, value)
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // libpq reads a + as itself
		return u.String()
	}
	for _, tc := range []struct{ name, url, want string }{
		{"default", base, "off"},
		{"url sets jit", with(t, "jit", "on"), "on"},
		{"url sets it in options", with(t, "options", "-c jit=on"), "on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := store.Open(ctx, tc.url, store.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got, err := s.Setting(ctx, "jit"); err != nil || got != tc.want {
				t.Fatalf("jit = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
