// Package testdate is the date the tests run at. Unset, it is the machine's:
// `make test` runs on the day it runs. REDRIVE_TEST_NOW moves it: a test
// binary that imports this package (every one that uses internal/pgtest
// does) starts its clocks at that time and lets them run from there —
//
//   - the tests' own "now" (Now), which every test reads instead of
//     time.Now, so that what a test stores is of the moved date;
//   - clock.Wall, the clock every service uses when a test injects none;
//   - the throwaway Postgres servers' now(), through libfaketime
//     (Debian's faketime package), preloaded into the server (ServerEnv).
//
// `make test-dates` runs the suite at the times calendar code breaks at
// (Instants): a week's first and last minute, a year's last, Feb 29, and a
// daylight-saving change in a TimeZone that has one. A test that passes
// only on some days fails there, whatever day it is run.
package testdate

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/internal/clock"
)

// Env names the variable that moves the tests' clocks: an RFC 3339 time.
const Env = "REDRIVE_TEST_NOW"

// offset is how far the tests' clocks are from the machine's.
var offset = parse(os.Getenv(Env), time.Now())

func init() {
	if offset != 0 {
		clock.Wall = clock.Shifted(offset)
	}
}

func parse(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: want an RFC 3339 time such as 2026-12-14T00:00:30Z: %v", Env, v, err))
	}
	return at.Sub(now)
}

// Now is the time it is for the tests: the machine's, or, with
// REDRIVE_TEST_NOW set, a time that was REDRIVE_TEST_NOW when the test
// binary started and has run on since. Like time.Now, it carries a
// monotonic reading, so durations between two Nows are exact.
func Now() time.Time { return time.Now().Add(offset) }

// Since is the time elapsed since t on the tests' clock (time.Since for a
// t of Now's, whose monotonic reading is gone).
func Since(t time.Time) time.Duration { return Now().Sub(t) }

// Until is the time until t on the tests' clock.
func Until(t time.Time) time.Duration { return t.Sub(Now()) }

// Moved says whether REDRIVE_TEST_NOW moved the tests' clocks.
func Moved() bool { return offset != 0 }

// ServerEnv is what a server process started for the tests (a throwaway
// Postgres) adds to its environment so that its clock is the tests':
// nothing when the clocks are not moved, else libfaketime preloaded with
// the offset. It fails when libfaketime is not installed.
func ServerEnv() ([]string, error) {
	if offset == 0 {
		return nil, nil
	}
	libs, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	if len(libs) == 0 {
		return nil, fmt.Errorf("%s moves Postgres's clock with libfaketime, which is not installed (Debian: apt-get install faketime)", Env)
	}
	secs := strconv.FormatFloat(offset.Seconds(), 'f', 3, 64)
	if !strings.HasPrefix(secs, "-") {
		secs = "+" + secs
	}
	return []string{"LD_PRELOAD=" + libs[0], "FAKETIME=" + secs,
		// Only the time of day moves: timeouts and waits stay the machine's.
		"FAKETIME_DONT_FAKE_MONOTONIC=1"}, nil
}

// ServerSettings are the server settings of a throwaway Postgres for the
// tests: its TimeZone is the tests' (TZ) when TZ names one.
func ServerSettings() map[string]string {
	tz := os.Getenv("TZ")
	if tz == "" || strings.HasPrefix(tz, ":") {
		return nil
	}
	return map[string]string{"TimeZone": tz}
}
