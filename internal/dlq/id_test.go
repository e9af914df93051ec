package dlq_test

import (
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
	at := time.Date(2028, 2, 29, 23, 59, 59, 999_000_000, time.UTC)
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
}
