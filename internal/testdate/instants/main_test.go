package main

import (
	"testing"
	"time"
)

func TestInstantsAreTheNextOnesAfterToday(t *testing.T) {
	zone, err := time.LoadLocation(dstZone)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		now  string
		want map[string]string
	}{
		{"2026-12-07T12:55:00Z", map[string]string{ // a Monday
			"week-start": "2026-12-14T00:00:30Z", "week-end": "2026-12-13T23:59:30Z",
			"year-end": "2026-12-31T23:59:30Z", "leap-day": "2028-02-29T23:59:30Z", "dst": "2027-03-14T06:59:30Z"}},
		{"2028-02-29T23:59:45Z", map[string]string{ // the leap day's last seconds, a Tuesday
			"week-start": "2028-03-06T00:00:30Z", "week-end": "2028-03-05T23:59:30Z",
			"year-end": "2028-12-31T23:59:30Z", "leap-day": "2032-02-29T23:59:30Z", "dst": "2028-03-12T06:59:30Z"}},
		{"2027-06-06T10:00:00Z", map[string]string{ // a Sunday, in summer time
			"week-start": "2027-06-07T00:00:30Z", "week-end": "2027-06-06T23:59:30Z", "dst": "2027-11-07T05:59:30Z"}},
	} {
		now, _ := time.Parse(time.RFC3339, c.now)
		for _, in := range instants(now, zone) {
			if want, ok := c.want[in.name]; ok && in.at.UTC().Format(time.RFC3339) != want {
				t.Errorf("at %s: %s = %s, want %s", c.now, in.name, in.at.UTC().Format(time.RFC3339), want)
			}
		}
	}
}
