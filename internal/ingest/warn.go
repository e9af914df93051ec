package ingest

import (
	"log/slog"
	"sync"
	"time"
)

// warnings logs warnings about what records hold (an invalid or clamped
// redrive.retry header, a record stored degraded) at most once per interval
// for each message, with how many more there were since the last one: a
// flood of forged records must not flood the log.
type warnings struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	last map[string]time.Time // message → when it was last logged
	more map[string]int       // message → how many were not logged since
}

func newWarnings(log *slog.Logger, every time.Duration, now func() time.Time) *warnings {
	return &warnings{log: log, every: every, now: now, last: map[string]time.Time{}, more: map[string]int{}}
}

// warn logs msg with args, unless msg was logged less than the interval
// ago; then it only counts it.
func (w *warnings) warn(msg string, args ...any) {
	now := w.now()
	w.mu.Lock()
	last, seen := w.last[msg]
	if seen && now.Sub(last) < w.every {
		w.more[msg]++
		w.mu.Unlock()
		return
	}
	more := w.more[msg]
	w.last[msg], w.more[msg] = now, 0
	w.mu.Unlock()
	args = append(args, "component", "ingest")
	if more > 0 {
		args = append(args, "more_since_last_logged", more)
	}
	w.log.Warn(msg, args...)
}
