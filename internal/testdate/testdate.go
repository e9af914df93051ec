// Package testdate is the date the tests run at. Unset, it is the machine's:
// `make test` runs on the day it runs. REDRIVE_TEST_NOW moves it: a test
// binary that imports this package (every one that uses internal/pgtest
// does) starts its clocks at that time and lets them run from there —
//
//   - the tests' own "now" (Now), which every test reads instead of
//     time.Now, so that what a test stores is of the moved date;
//   - clock.Wall, the clock every service uses when a test injects none;
//   - the throwaway Postgres servers' now(), through datefudge (Debian's
//     datefudge package), preloaded into the server (ProcessEnv).
//
// `make test-dates` runs the suite at the times calendar code breaks at
// (Instants): a week's first and last minute, a year's last, Feb 29, and a
// daylight-saving change in a TimeZone that has one. A test that passes
// only on some days fails there, whatever day it is run.
package testdate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/clock"
)

// Env names the variable that moves the tests' clocks: an RFC 3339 time.
const Env = "REDRIVE_TEST_NOW"

// envFrom names the machine's time at which the tests' clocks read Env (RFC
// 3339): set by the first test binary, so that the processes it starts (a
// crash test's child, the tour's redrive dev) run on its clock, not on one
// that starts again at Env.
const envFrom = Env + "_FROM"

// started is the machine's time this process started at.
var started = time.Now()

// offset is how far the tests' clocks are from the machine's.
var offset = parse(os.Getenv(Env), os.Getenv(envFrom), started)

func init() {
	if offset != 0 {
		clock.Wall = clock.Shifted(offset)
		if os.Getenv(envFrom) == "" {
			_ = os.Setenv(envFrom, started.Format(time.RFC3339Nano)) // never fails for a valid name
		}
	}
}

func parse(v, from string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: want an RFC 3339 time such as 2026-12-14T00:00:30Z: %v", Env, v, err))
	}
	if from != "" {
		if now, err = time.Parse(time.RFC3339Nano, from); err != nil {
			panic(fmt.Sprintf("%s=%q: want an RFC 3339 time: %v", envFrom, from, err))
		}
	}
	// Whole seconds, as datefudge moves the server's clock by.
	return at.Sub(now).Round(time.Second)
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

// ProcessEnv is what a process started for the tests (a throwaway Postgres,
// a headless Chromium) adds to its environment so that its clock is the tests':
// nothing when the clocks are not moved, else datefudge preloaded with the
// offset. It fails when datefudge is not installed.
//
// Not libfaketime: it reads the real time inside a signal handler that
// interrupts a wait it wraps (epoll_wait, poll), and Postgres's timeouts
// (statement_timeout, lock_timeout, deadlock_timeout) check the time in
// their SIGALRM handler: moved ahead, they never fire. datefudge only
// shifts the wall clock (time, gettimeofday, CLOCK_REALTIME) by a constant.
func ProcessEnv() ([]string, error) {
	if offset == 0 {
		return nil, nil
	}
	libs, _ := filepath.Glob("/usr/lib/*/datefudge/datefudge.so")
	if len(libs) == 0 {
		return nil, fmt.Errorf("%s moves Postgres's clock with datefudge, which is not installed (Debian: apt-get install datefudge)", Env)
	}
	// DATEFUDGE is the seconds to take off the machine's time.
	return []string{"LD_PRELOAD=" + libs[0], "DATEFUDGE=" + strconv.FormatInt(int64(-offset/time.Second), 10)}, nil
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

// Command is exec.Command with the tests' clock (ProcessEnv) in the
// process's environment: a tool such as kcat stamps what it writes with the
// time the test runs at, as it would on that day.
func Command(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	env, err := ProcessEnv()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// Restamp moves a time the machine's clock gave in the last second (a
// Kafka client stamping a record it produces) to the tests' clock, and
// returns any other time as it is.
func Restamp(t time.Time) time.Time {
	if d := time.Since(t); offset == 0 || d < 0 || d > time.Second {
		return t
	}
	return t.Add(offset)
}
