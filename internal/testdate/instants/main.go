// Command instants prints the times `make test-dates` runs the suite at, one
// per line: a name, the TZ to run in, and the time (RFC 3339, UTC) to set
// REDRIVE_TEST_NOW to. They are the next such times after the day it runs,
// so the suite's own partitions and windows are near the machine's.
//
//	week-start   UTC               a Monday 00:00:30: a new weekly partition
//	week-end     UTC               the Sunday 23:59:30 before it
//	year-end     UTC               Dec 31 23:59:30: a month's and a year's end
//	leap-day     UTC               Feb 29 23:59:30: the leap day's last minute
//	dst          America/New_York  30 s before its next daylight-saving change
package main

import (
	"fmt"
	"os"
	"time"
	_ "time/tzdata" // the DST instant does not depend on the machine's zoneinfo
)

// dstZone is a TimeZone with daylight-saving changes, for the tests' TZ
// and Postgres's TimeZone setting.
const dstZone = "America/New_York"

func main() {
	zone, err := time.LoadLocation(dstZone)
	if err != nil {
		fmt.Fprintln(os.Stderr, "instants:", err)
		os.Exit(1)
	}
	for _, in := range instants(time.Now().UTC(), zone) {
		fmt.Printf("%s\t%s\t%s\n", in.name, in.tz, in.at.UTC().Format(time.RFC3339))
	}
}

type instant struct {
	name, tz string
	at       time.Time
}

func instants(now time.Time, zone *time.Location) []instant {
	monday := nextMonday(now)
	return []instant{
		{"week-start", "UTC", monday.Add(30 * time.Second)},
		{"week-end", "UTC", monday.Add(-30 * time.Second)},
		{"year-end", "UTC", nextYearEnd(now)},
		{"leap-day", "UTC", nextLeapDayEnd(now)},
		{"dst", dstZone, nextZoneChange(now, zone).Add(-30 * time.Second)},
	}
}

// nextMonday is the start (00:00 UTC) of the next week after now's.
func nextMonday(now time.Time) time.Time {
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	days := (8 - int(day.Weekday())) % 7
	if days == 0 {
		days = 7
	}
	return day.AddDate(0, 0, days)
}

// nextYearEnd is 30 s before the next new year (UTC) after now.
func nextYearEnd(now time.Time) time.Time {
	return time.Date(now.Year()+1, time.January, 1, 0, 0, 0, 0, time.UTC).Add(-30 * time.Second)
}

// nextLeapDayEnd is 30 s before the end of the next Feb 29 (UTC) after now.
func nextLeapDayEnd(now time.Time) time.Time {
	for y := now.Year(); ; y++ {
		end := time.Date(y, time.March, 1, 0, 0, 0, 0, time.UTC).Add(-30 * time.Second)
		if time.Date(y, time.February, 29, 0, 0, 0, 0, time.UTC).Month() == time.February && end.After(now) {
			return end
		}
	}
}

// nextZoneChange is the first instant after now at which zone's UTC offset
// changes (found hour by hour, then to the second).
func nextZoneChange(now time.Time, zone *time.Location) time.Time {
	offset := func(t time.Time) int { _, o := t.In(zone).Zone(); return o }
	from := now.Truncate(time.Hour)
	for t := from.Add(time.Hour); t.Before(now.AddDate(2, 0, 0)); t = t.Add(time.Hour) {
		if offset(t) != offset(from) {
			lo, hi := t.Add(-time.Hour), t // offset(lo) is the old one
			for hi.Sub(lo) > time.Second {
				mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
				if offset(mid) == offset(from) {
					lo = mid
				} else {
					hi = mid
				}
			}
			return hi
		}
	}
	panic(dstZone + " has no offset change in two years")
}
