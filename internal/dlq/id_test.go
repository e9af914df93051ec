package dlq_test

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// idTime reads the millisecond of a UUIDv7 as RFC 9562 lays it out.
func idTime(t *testing.T, id string) time.Time {
	t.Helper()
	var ms int64
	for _, c := range id[0:8] + id[9:13] {
		ms = ms<<4 | int64(hexDigit(c))
	}
	return time.UnixMilli(ms).UTC()
}

func hexDigit(c rune) int {
	if c <= '9' {
		return int(c - '0')
	}
	return int(c-'a') + 10
}

// A record's id is a UUIDv7 of the time it is given, not of the machine's
// clock, and ids made at one time sort in the order they were made, past
// the 4,096 a millisecond's counter holds.
func TestNewIDIsAUUIDv7OfItsTime(t *testing.T) {
	t.Parallel()
	// A millisecond of its own each run (the counts are the process's).
	at := time.Date(2028, 2, 29, 23, 59, 59, 999_000_000, time.UTC).Add(-time.Duration(rand.Int64N(1<<30)) * time.Second)
	var made []string
	for range 10_000 {
		id := dlq.NewID(at)
		if !uuidV7.MatchString(id) {
			t.Fatalf("%q is not a UUIDv7", id)
		}
		made = append(made, id)
	}
	if !slices.IsSorted(made) {
		t.Fatal("ids made one after another do not sort in that order")
	}
	if got := idTime(t, made[0]); !got.Equal(at) {
		t.Errorf("first id of %v carries %v", at, got)
	}
	// 10,000 ids borrow at most two milliseconds ahead.
	if got := idTime(t, made[len(made)-1]); got.Before(at) || got.Sub(at) > 2*time.Millisecond {
		t.Errorf("last id of %v carries %v", at, got)
	}
	slices.Sort(made)
	if len(slices.Compact(made)) != 10_000 {
		t.Error("two ids are the same")
	}
	// A clock set back a year gives ids of its own time.
	back := at.AddDate(-1, 0, 0)
	if got := idTime(t, dlq.NewID(back)); !got.Equal(back) {
		t.Errorf("id of %v carries %v", back, got)
	}
	// Clocks far apart, made at in turn (tests pinned at different times,
	// in parallel), each count on at their own time.
	a, b := at.AddDate(1, 0, 0), at.AddDate(1, 0, -70)
	var as, bs []string
	for range 300 {
		as, bs = append(as, dlq.NewID(a)), append(bs, dlq.NewID(b))
	}
	for _, ids := range [][]string{as, bs} {
		if !slices.IsSorted(ids) {
			t.Fatalf("ids of one time, made in turn with another's, do not sort in the order they were made: %v", ids[:3])
		}
	}
	if got := idTime(t, bs[len(bs)-1]); !got.Equal(b) {
		t.Errorf("the 300th id of %v carries %v", b, got)
	}
}
