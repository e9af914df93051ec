package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as an ISO 8601 duration (PT30S, PT5M, P180D)
// in JSON and YAML, as the OJS specs require for every duration field (RET-02).
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String returns the canonical ISO 8601 form, see FormatDuration.
func (d Duration) String() string { return FormatDuration(time.Duration(d)) }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes d as an ISO 8601 string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads an ISO 8601 string. A number is rejected rather than read as
// nanoseconds or seconds: a bare number is exactly the ambiguity ISO strings avoid.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("must be an ISO 8601 duration string such as PT30S, got %s", b)
	}
	return d.UnmarshalText([]byte(s))
}

// MarshalYAML writes d as an ISO 8601 string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads an ISO 8601 string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return fmt.Errorf("must be an ISO 8601 duration string such as PT30S, got %s", describeNode(n))
	}
	return d.UnmarshalText([]byte(n.Value))
}

const day = 24 * time.Hour

// ParseDuration parses an ISO 8601 duration: PnW, or P[nD][T[nH][nM][n[.f]S]] with
// at least one component, designators in that order and upper case, a fraction
// only on seconds (at most 9 digits, '.' as the separator). Examples: PT0.5S,
// PT1M30S, PT24H, P7D, P1DT12H, P2W.
//
// Years and months are rejected: they have no fixed length, and a silent guess
// (30 days? 31?) would make retention and retry delays wrong in ways nobody
// notices. Write days instead (P365D). Negative durations are rejected too.
func ParseDuration(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid ISO 8601 duration %q: %w", s, err)
	}
	return d, nil
}

var errDurationOverflow = errors.New("too large (the maximum is about 292 years, P106751D)")

// component ranks fix the order designators must appear in.
const (
	rankYear = iota
	rankMonth
	rankWeek
	rankDay
	rankHour
	rankMinute
	rankSecond
)

func parseDuration(s string) (time.Duration, error) {
	switch {
	case s == "":
		return 0, errors.New("empty (expected e.g. PT30S, PT5M, P7D)")
	case s[0] == '-' || s[0] == '+':
		return 0, errors.New("a duration cannot be signed")
	case s[0] == 'p':
		return 0, errors.New("designators must be upper case (P, T, D, H, M, S)")
	case s[0] != 'P':
		return 0, errors.New(`must start with "P" (e.g. PT30S, PT5M, P7D)`)
	case len(s) == 1:
		return 0, errors.New(`"P" must be followed by at least one component`)
	}
	var (
		total    time.Duration
		inTime   bool
		last     = -1 // rank of the previous component
		nTime    int  // components after T
		sawWeeks bool
	)
	for i := 1; i < len(s); {
		if s[i] == 'T' {
			if inTime {
				return 0, errors.New(`"T" appears twice`)
			}
			inTime = true
			i++
			if i == len(s) {
				return 0, errors.New(`"T" must be followed by at least one of H, M or S`)
			}
			continue
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		intPart := s[start:i]
		if intPart == "" {
			return 0, fmt.Errorf("expected a number at offset %d, found %q", start, s[start])
		}
		var frac string
		if i < len(s) && (s[i] == '.' || s[i] == ',') {
			if s[i] == ',' {
				return 0, errors.New(`use "." as the decimal separator`)
			}
			i++
			fs := i
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
			frac = s[fs:i]
			if frac == "" {
				return 0, errors.New(`"." must be followed by digits`)
			}
		}
		if i == len(s) {
			return 0, fmt.Errorf("number %s has no designator (D, H, M or S)", s[start:i])
		}
		c := s[i]
		i++
		var rank int
		var unit time.Duration
		switch {
		case c == 'Y' && !inTime:
			return 0, errors.New("years have no fixed length; write days instead (e.g. P365D)")
		case c == 'M' && !inTime:
			return 0, fmt.Errorf("P%sM means %s months, which have no fixed length; for minutes write PT%sM, for a calendar span write days", intPart, intPart, intPart)
		case c == 'W' && !inTime:
			rank, unit = rankWeek, 7*day
		case c == 'D' && !inTime:
			rank, unit = rankDay, day
		case c == 'D':
			return 0, errors.New(`days must come before "T" (e.g. P1DT12H)`)
		case (c == 'H' || c == 'S') && !inTime:
			return 0, fmt.Errorf(`%c must follow "T" (e.g. PT%s%c)`, c, intPart, c)
		case c == 'H':
			rank, unit = rankHour, time.Hour
		case c == 'M':
			rank, unit = rankMinute, time.Minute
		case c == 'S':
			rank, unit = rankSecond, time.Second
		case c >= 'a' && c <= 'z':
			return 0, errors.New("designators must be upper case (P, T, D, H, M, S)")
		default:
			return 0, fmt.Errorf("unknown designator %q", c)
		}
		if rank <= last {
			return 0, fmt.Errorf("%c is repeated or out of order (the order is W or D, then T, H, M, S)", c)
		}
		if sawWeeks || (rank == rankWeek && last >= 0) {
			return 0, errors.New("weeks cannot be combined with other components (write days, e.g. P10D)")
		}
		sawWeeks = rank == rankWeek
		if frac != "" && rank != rankSecond {
			return 0, errors.New("only seconds may have a fraction (e.g. PT1.5S, not PT1.5M)")
		}
		last = rank
		if inTime {
			nTime++
		}
		v, err := componentValue(intPart, frac, unit)
		if err != nil {
			return 0, err
		}
		if total > math.MaxInt64-v {
			return 0, errDurationOverflow
		}
		total += v
	}
	if sawWeeks && inTime {
		return 0, errors.New("weeks cannot be combined with other components (write days, e.g. P10D)")
	}
	if inTime && nTime == 0 {
		return 0, errors.New(`"T" must be followed by at least one of H, M or S`)
	}
	return total, nil
}

// componentValue is intPart[.frac] units, exactly, in nanoseconds.
func componentValue(intPart, frac string, unit time.Duration) (time.Duration, error) {
	n, err := strconv.ParseUint(intPart, 10, 63)
	if err != nil || n > uint64(math.MaxInt64/int64(unit)) {
		return 0, errDurationOverflow
	}
	v := time.Duration(n) * unit
	if frac == "" {
		return v, nil
	}
	// Only seconds carry a fraction, so the fraction is nanoseconds once padded to 9 digits.
	if len(frac) > 9 {
		return 0, errors.New("fractions of a second finer than a nanosecond (9 digits) are not supported")
	}
	ns, _ := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	if v > math.MaxInt64-time.Duration(ns) {
		return 0, errDurationOverflow
	}
	return v + time.Duration(ns), nil
}

// FormatDuration writes d in canonical ISO 8601 form: PT0S for zero, PnD for a
// whole number of days, otherwise PT[nH][nM][n[.f]S] with hours not folded into
// days (PT36H), because the OJS minimum parser only knows H, M and S and retry
// intervals are rarely whole days. ParseDuration(FormatDuration(d)) == d for every
// d >= 0. A negative d gets a leading '-' (ISO 8601-2), which ParseDuration rejects.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "PT0S"
	}
	var b strings.Builder
	u := uint64(d)
	if d < 0 {
		b.WriteByte('-')
		u = -u // two's complement: correct even for math.MinInt64
	}
	b.WriteByte('P')
	if u%uint64(day) == 0 {
		b.WriteString(strconv.FormatUint(u/uint64(day), 10))
		b.WriteByte('D')
		return b.String()
	}
	b.WriteByte('T')
	h, u := u/uint64(time.Hour), u%uint64(time.Hour)
	m, u := u/uint64(time.Minute), u%uint64(time.Minute)
	sec, ns := u/uint64(time.Second), u%uint64(time.Second)
	if h > 0 {
		b.WriteString(strconv.FormatUint(h, 10))
		b.WriteByte('H')
	}
	if m > 0 {
		b.WriteString(strconv.FormatUint(m, 10))
		b.WriteByte('M')
	}
	if sec > 0 || ns > 0 {
		b.WriteString(strconv.FormatUint(sec, 10))
		if ns > 0 {
			b.WriteByte('.')
			b.WriteString(strings.TrimRight(fmt.Sprintf("%09d", ns), "0"))
		}
		b.WriteByte('S')
	}
	return b.String()
}
