package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The workers suite burns every job down over real HTTP in each setup (it
// fails unless every job ends completed by an ack) and reports each setup
// against its raw loop; without a River peer it says River was not measured.
func TestWorkersSuiteBurnsDownEveryJobOverHTTP(t *testing.T) {
	var out bytes.Buffer
	res, err := Workers(context.Background(), Config{DatabaseURL: pgtest.URL(t), Records: 20 * 25, Out: &out})
	if err != nil {
		t.Fatalf("Workers: %v\n%s", err, out.String())
	}
	if res.Jobs != 25 || len(res.Runs) != len(workerSetups) {
		t.Fatalf("jobs %d, runs %d; want 25 jobs, %d runs", res.Jobs, len(res.Runs), len(workerSetups))
	}
	for _, run := range res.Runs {
		if run.API <= 0 || run.Raw <= 0 {
			t.Errorf("%s: API %v, raw %v: want both measured", run.Setup, run.API, run.Raw)
		}
	}
	figures := res.Figures()
	if len(figures) != len(workerSetups) || figures[0].Name != "workers API 2×10 / raw claim loop" || figures[0].Value <= 0 {
		t.Errorf("figures without River = %+v", figures)
	}
	if !strings.Contains(out.String(), "River: not measured") {
		t.Errorf("report does not say River was not measured:\n%s", out.String())
	}
}
