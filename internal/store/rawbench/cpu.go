package rawbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ServerCPU is the CPU time the Postgres server has used so far: its
// postmaster and every child (backends, WAL writer, checkpointer,
// autovacuum), the exited ones included (their time is the postmaster's
// children's time). Two readings bracket what a benchmark step cost the
// server whatever else runs on the machine, which a rate cannot say on a
// busy machine. It needs the server on this machine (/proc); elsewhere it
// fails.
func (d *DB) ServerCPU(ctx context.Context) (time.Duration, error) {
	var backend int
	if err := d.pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return 0, fmt.Errorf("server cpu: %w", err)
	}
	st, err := readStat(backend)
	if err != nil {
		return 0, fmt.Errorf("server cpu: the server is not a process of this machine: %w", err)
	}
	postmaster := st.ppid
	pm, err := readStat(postmaster)
	if err != nil {
		return 0, fmt.Errorf("server cpu: %w", err)
	}
	total := pm.self + pm.children
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("server cpu: %w", err)
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == postmaster {
			continue
		}
		if c, err := readStat(pid); err == nil && c.ppid == postmaster {
			total += c.self + c.children
		}
	}
	return total, nil
}

// procStat is what ServerCPU reads of a process in /proc/<pid>/stat.
type procStat struct {
	ppid     int
	self     time.Duration // utime + stime
	children time.Duration // cutime + cstime: its exited children's
}

// clockTick is the unit of /proc's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name, in parentheses, may hold spaces: fields start after it.
	end := strings.LastIndexByte(string(b), ')')
	if end < 0 {
		return procStat{}, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 15 {
		return procStat{}, errors.New("unexpected /proc stat format")
	}
	n := make([]int64, 0, 5)
	for _, i := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("unexpected /proc stat field: %w", err)
		}
		n = append(n, v)
	}
	return procStat{ppid: int(n[0]), self: time.Duration(n[1]+n[2]) * clockTick,
		children: time.Duration(n[3]+n[4]) * clockTick}, nil
}

// ProcessCPU is the CPU time a process of this machine has used so far,
// its exited children's included.
func ProcessCPU(pid int) (time.Duration, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, fmt.Errorf("cpu of process %d: %w", pid, err)
	}
	return st.self + st.children, nil
}
