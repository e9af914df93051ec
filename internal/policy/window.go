package policy

import (
	"errors"
	"fmt"
	"time"
)

// Window is a daily time window, [Start, End) minutes after midnight in Loc;
// Start > End wraps past midnight (22:00–02:00).
type Window struct {
	Start, End int
	Loc        *time.Location
}

// Contains reports whether t falls in the window.
func (w *Window) Contains(t time.Time) bool {
	if w == nil {
		return true
	}
	lt := t.In(w.Loc)
	m := lt.Hour()*60 + lt.Minute()
	if w.Start <= w.End {
		return m >= w.Start && m < w.End
	}
	return m >= w.Start || m < w.End
}

// ParseWindow reads "HH:MM" start and end in the IANA zone tz ("" is UTC).
// Both empty is no window.
func ParseWindow(start, end, tz string) (*Window, error) {
	if start == "" && end == "" {
		return nil, nil
	}
	s, err := parseClock(start)
	if err != nil {
		return nil, fmt.Errorf("window.start: %w", err)
	}
	e, err := parseClock(end)
	if err != nil {
		return nil, fmt.Errorf("window.end: %w", err)
	}
	if s == e {
		return nil, errors.New("window: start and end must differ")
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("window.time_zone: unknown time zone %q", tz)
	}
	return &Window{Start: s, End: e, Loc: loc}, nil
}

func parseClock(s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a time of day (want HH:MM, e.g. 02:00)", s)
	}
	return t.Hour()*60 + t.Minute(), nil
}
