package bench

import (
	"fmt"
	"io"
	"slices"
)

// Figure is one ratio a suite measured against its raw baseline in the same
// run. Target 0 is informational.
type Figure struct {
	Name   string
	Value  float64
	Target float64
}

// Figures is the ingest ratio of a run.
func (r *IngestResult) Figures() []Figure {
	raw := rate(r.Records, r.RawCopy)
	return []Figure{
		{Name: "ingest / raw COPY, broker in process", Value: rate(r.IngestCount, r.Ingest) / raw, Target: IngestInProcessTarget},
		{Name: "ingest / raw COPY, broker apart", Value: rate(r.IngestBrokerProcessCount, r.IngestBrokerProcess) / raw, Target: IngestApartTarget},
	}
}

// Figures are the redelivery ratios: the single loop has the target.
func (r *RedeliverResult) Figures() []Figure {
	out := make([]Figure, 0, len(r.Runs))
	for _, run := range r.Runs {
		f := Figure{Name: fmt.Sprintf("redelivery, %d worker(s) / raw claim loop", run.Workers),
			Value: rate(r.Records, run.Scheduler) / rate(r.Records, run.RawLoop)}
		if run.Workers == 1 {
			f.Target = RedeliverTarget
		}
		out = append(out, f)
	}
	if r.River > 0 {
		out = append(out, Figure{Name: fmt.Sprintf("redelivery, %d worker(s) / River burn-down", defaultWorkers),
			Value: rate(r.Records, r.Runs[defaultWorkers-1].Scheduler) / rate(r.Records, r.River), Target: RiverTarget})
		// What the rate ratio would be were both held by CPU alone: it does
		// not move with the machine's other load.
		if c := cpuRatio(r.RiverCPU, r.Runs[defaultWorkers-1].SchedulerCPU); c > 0 {
			out = append(out, Figure{Name: "redelivery CPU: River's per job / Redrive's per record", Value: c})
		}
	}
	return out
}

// Figures is the ingest speed kept while pruning runs.
func (r *PruneResult) Figures() []Figure {
	return []Figure{{Name: "ingest while pruning / ingest alone", Value: r.IngestPruning / r.IngestAlone}}
}

// The targets the ratios are held to.
const (
	IngestTarget = 0.80
	// IngestInProcessTarget and IngestApartTarget are the ingest suite's:
	// ingest over a raw COPY of the same rows, with kfake in the bench's
	// process (its CPU booked to ingest) and in a process of its own.
	IngestInProcessTarget = 0.85
	IngestApartTarget     = 0.90
	RedeliverTarget       = 0.70
	// RiverTarget is Redrive's redelivery rate with its default settings
	// over River's burn-down, configured as River benchmarks itself.
	RiverTarget = 2.0
)

// Summarize prints, for each figure measured in rounds, its median and range
// over the rounds, and whether the median meets the target. One noisy run
// decides nothing.
func Summarize(out io.Writer, rounds [][]Figure) {
	var names []string
	values := map[string][]float64{}
	targets := map[string]float64{}
	for _, round := range rounds {
		for _, f := range round {
			if _, ok := values[f.Name]; !ok {
				names = append(names, f.Name)
			}
			values[f.Name] = append(values[f.Name], f.Value)
			targets[f.Name] = f.Target
		}
	}
	if len(names) == 0 {
		return
	}
	fmt.Fprintf(out, "summary over %d round(s): median (min–max)\n", len(rounds))
	for _, name := range names {
		vs := slices.Sorted(slices.Values(values[name]))
		med := median(vs)
		verdict := "(informational)"
		if t := targets[name]; t > 0 {
			verdict = fmt.Sprintf("target >= %.2f: met", t)
			if med < t {
				verdict = fmt.Sprintf("target >= %.2f: MISSED", t)
			}
		}
		fmt.Fprintf(out, "  %-44s %5.2f  (%.2f–%.2f)  %s\n", name, med, vs[0], vs[len(vs)-1], verdict)
	}
}

// median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
