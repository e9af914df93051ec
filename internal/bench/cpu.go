package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/redrive/redrive/internal/store/rawbench"
)

// CPU is what a benchmark step cost in CPU time: the Postgres server's
// processes and the measured program's. On a machine whose other load varies
// from run to run the rates do too, while these stay what the step itself
// cost; divided by the records they are the cost of one.
type CPU struct {
	Server  time.Duration // every process of the Postgres server
	Process time.Duration // the program measured (for the scheduler: this process, its in-process broker included)
	// ServerKnown is false when the server is not on this machine.
	ServerKnown bool
	// Broker is the Kafka broker's process, when it runs apart; it is not
	// counted in Total: in a deployment it runs on machines of its own.
	Broker time.Duration
}

// Total is the server's and the program's CPU time.
func (c CPU) Total() time.Duration { return c.Server + c.Process }

// per renders the CPU per record of n records.
func (c CPU) per(n int, what string) string {
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	if !c.ServerKnown {
		return fmt.Sprintf("CPU per %s: process %.1f µs, Postgres not measured (not on this machine)", what, us(c.Process))
	}
	s := fmt.Sprintf("CPU per %s %.1f µs: Postgres %.1f, process %.1f", what, us(c.Total()), us(c.Server), us(c.Process))
	if c.Broker > 0 {
		s += fmt.Sprintf(" (and broker %.1f)", us(c.Broker))
	}
	return s
}

// cpuMeter starts measuring the CPU time of the server of pool, of this
// process and of the broker process (pid, 0 for none); the function it
// returns says what was used since. A server on another machine is not
// measured (ServerKnown false).
func cpuMeter(ctx context.Context, pool *rawbench.DB, broker int) func() CPU {
	server0, serverErr := pool.ServerCPU(ctx)
	self0 := processCPU()
	broker0, brokerErr := rawbench.ProcessCPU(broker)
	return func() CPU {
		use := CPU{Process: processCPU() - self0}
		if broker1, err := rawbench.ProcessCPU(broker); broker > 0 && brokerErr == nil && err == nil {
			use.Broker = broker1 - broker0
		}
		if serverErr == nil {
			if server1, err := pool.ServerCPU(ctx); err == nil {
				use.Server, use.ServerKnown = server1-server0, true
			}
		}
		return use
	}
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
