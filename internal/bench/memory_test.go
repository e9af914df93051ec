package bench

import "testing"

// gcStats reads the lines GODEBUG=gctrace=1 prints (as Go 1.26 prints
// them), among serve's own log lines.
func TestGCStats(t *testing.T) {
	out := `time=2026-11-26T12:41:16.210Z level=WARN msg="AUTH DISABLED" component=app
gc 263 @39.513s 2%: 1.8+13+0.036 ms clock, 3.6+0/4.5/2.4+0.073 ms cpu, 82->89->42 MB, 96 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 264 @39.685s 2%: 0.045+15+0.037 ms clock, 0.090+1.0/5.8/0+0.075 ms cpu, 73->81->49 MB, 85 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 265 @39.757s 2%: 1.5+22+0.20 ms clock, 3.1+0.36/8.3/0+0.41 ms cpu, 67->77->41 MB, 79 MB goal, 0 MB stacks, 0 MB globals, 2 P
`
	got := gcStats(out)
	if want := (GCStats{Cycles: 3, Live: 49 << 20, Goal: 96 << 20}); got != want {
		t.Fatalf("gcStats = %+v, want %+v", got, want)
	}
	if got := gcStats("no collections"); got != (GCStats{}) {
		t.Fatalf("gcStats of no trace = %+v", got)
	}
}
