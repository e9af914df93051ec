package policy

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		// OJS retry spec §4.1, the recommended subset.
		{"PT0.5S", 500 * time.Millisecond},
		{"PT1S", time.Second},
		{"PT5S", 5 * time.Second},
		{"PT30S", 30 * time.Second},
		{"PT1M", time.Minute},
		{"PT5M", 5 * time.Minute},
		{"PT15M", 15 * time.Minute},
		{"PT1H", time.Hour},
		{"PT24H", 24 * time.Hour},
		// Days, weeks, combinations, fractions.
		{"P1D", 24 * time.Hour},
		{"P7D", 7 * 24 * time.Hour},
		{"P30D", 30 * 24 * time.Hour},
		{"P180D", 180 * 24 * time.Hour},
		{"P365D", 365 * 24 * time.Hour},
		{"P2W", 14 * 24 * time.Hour},
		{"P1DT12H", 36 * time.Hour},
		{"P1DT1H1M1.5S", 25*time.Hour + time.Minute + 1500*time.Millisecond},
		{"PT1H30M", 90 * time.Minute},
		{"PT1H30S", time.Hour + 30*time.Second},
		{"PT90S", 90 * time.Second},
		{"PT0S", 0},
		{"P0D", 0},
		{"PT0.000000001S", time.Nanosecond},
		{"PT1.123456789S", time.Second + 123456789},
		{"PT01S", time.Second},
		{"P106751D", 106751 * 24 * time.Hour},
		{"PT2562047H47M16.854775807S", math.MaxInt64},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil {
			t.Errorf("ParseDuration(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseDurationRejects(t *testing.T) {
	t.Parallel()
	// RET-19: malformed durations are rejected, each with a message that helps.
	tests := []struct{ in, wantErr string }{
		{"", "empty"},
		{"P", `"P" must be followed`},
		{"PT", `"T" must be followed`},
		{"P1DT", `"T" must be followed`},
		{"1S", `must start with "P"`},
		{"T1S", `must start with "P"`},
		{"pt1s", "upper case"},
		{"PT1s", "upper case"},
		{"-PT1S", "cannot be signed"},
		{"+PT1S", "cannot be signed"},
		{"PT-1S", "expected a number"},
		{"P1Y", "years have no fixed length"},
		{"P5M", "for minutes write PT5M"},
		{"P1Y2M3D", "years"},
		{"PT1.5M", "only seconds may have a fraction"},
		{"P1.5D", "only seconds may have a fraction"},
		{"PT1,5S", `use "." as the decimal separator`},
		{"PT1.S", `"." must be followed by digits`},
		{"PT.5S", "expected a number"},
		{"PT1.0000000001S", "finer than a nanosecond"},
		{"PT5", "has no designator"},
		{"P5", "has no designator"},
		{"PT1M1H", "out of order"},
		{"PT1S1S", "repeated"},
		{"P1D1D", "repeated"},
		{"P1H", `H must follow "T"`},
		{"P1S", `S must follow "T"`},
		{"PT1D", `days must come before "T"`},
		{"P1W2D", "weeks cannot be combined"},
		{"P1WT1H", "weeks cannot be combined"},
		{"P2D1W", "out of order"},
		{"PTT1S", `"T" appears twice`},
		{"P1DT1HT1M", `"T" appears twice`},
		{"PT1X", "unknown designator"},
		{"PT1H ", "expected a number"},
		{" PT1H", `must start with "P"`},
		{"P106752D", "too large"},
		{"PT9223372037S", "too large"},
		{"PT99999999999999999999S", "too large"},
		{"P99999999999999999999D", "too large"},
		{"PT2562047H47M16.854775808S", "too large"},
	}
	for _, tt := range tests {
		_, err := ParseDuration(tt.in)
		if err == nil {
			t.Errorf("ParseDuration(%q) succeeded, want error containing %q", tt.in, tt.wantErr)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseDuration(%q) = %q, want it to contain %q", tt.in, err, tt.wantErr)
		}
		if !strings.Contains(err.Error(), "invalid ISO 8601 duration") {
			t.Errorf("ParseDuration(%q) = %q, want it to say what it is", tt.in, err)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "PT0S"},
		{time.Nanosecond, "PT0.000000001S"},
		{500 * time.Millisecond, "PT0.5S"},
		{time.Second, "PT1S"},
		{90 * time.Second, "PT1M30S"},
		{5 * time.Minute, "PT5M"},
		{time.Hour, "PT1H"},
		{time.Hour + 30*time.Second, "PT1H30S"},
		{24 * time.Hour, "P1D"},
		{36 * time.Hour, "PT36H"},
		{7 * 24 * time.Hour, "P7D"},
		{180 * 24 * time.Hour, "P180D"},
		{-time.Second, "-PT1S"},
		{math.MaxInt64, "PT2562047H47M16.854775807S"},
		{math.MinInt64, "-PT2562047H47M16.854775808S"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.in); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDurationJSONAndYAML(t *testing.T) {
	t.Parallel()
	type doc struct {
		D Duration `json:"d" yaml:"d"`
	}
	var j doc
	if err := json.Unmarshal([]byte(`{"d":"PT1M30S"}`), &j); err != nil || j.D.Std() != 90*time.Second {
		t.Fatalf("json: %v %v", j.D, err)
	}
	b, _ := json.Marshal(doc{D: Duration(180 * 24 * time.Hour)})
	if string(b) != `{"d":"P180D"}` {
		t.Errorf("json marshal = %s", b)
	}
	if err := json.Unmarshal([]byte(`{"d":60}`), &j); err == nil || !strings.Contains(err.Error(), "ISO 8601 duration string") {
		t.Errorf("json number: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"d":"1m"}`), &j); err == nil || !strings.Contains(err.Error(), `must start with "P"`) {
		t.Errorf("json Go-style: %v", err)
	}

	var y doc
	if err := yaml.Unmarshal([]byte("d: PT0.5S\n"), &y); err != nil || y.D.Std() != 500*time.Millisecond {
		t.Fatalf("yaml: %v %v", y.D, err)
	}
	out, _ := yaml.Marshal(doc{D: Duration(5 * time.Minute)})
	if string(out) != "d: PT5M\n" {
		t.Errorf("yaml marshal = %q", out)
	}
	if err := yaml.Unmarshal([]byte("d: 60\n"), &y); err == nil || !strings.Contains(err.Error(), "got integer 60") {
		t.Errorf("yaml number: %v", err)
	}
}

// FuzzParseDuration checks that formatting is canonical and round-trips, and that
// the schema's duration pattern accepts everything the parser accepts.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"PT1S", "PT0.5S", "P180D", "P2W", "P1DT1H1M1.5S", "PT24H", "PT0S",
		"P1Y", "PT", "PT1.0000000001S", "PT2562047H47M16.854775807S", "P1D1W", "-PT1S"} {
		f.Add(s)
	}
	pattern := durationPattern(f)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		if !pattern.MatchString(s) {
			t.Fatalf("ParseDuration accepts %q but the schema pattern rejects it", s)
		}
		formatted := FormatDuration(d)
		d2, err := ParseDuration(formatted)
		if err != nil {
			t.Fatalf("ParseDuration(FormatDuration(%v) = %q): %v", d, formatted, err)
		}
		if d2 != d {
			t.Fatalf("round trip %q → %v → %q → %v", s, d, formatted, d2)
		}
		if again := FormatDuration(d2); again != formatted {
			t.Fatalf("format not canonical: %q then %q", formatted, again)
		}
	})
}
