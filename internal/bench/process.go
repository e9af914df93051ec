package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// self is the redrive binary running the bench: the broker and serve
// processes are started from it.
func self() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the redrive binary: %w", err)
	}
	return exe, nil
}

// process is a child redrive process (broker or serve).
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	logs *lockedBuffer // serve's output; nil for the broker
}

// lockedBuffer collects a child's output while the bench reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len is how many bytes were written so far.
func (b *lockedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// stop ends the process with SIGTERM (SIGKILL after 10 s) and waits for it.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// brokerAddr matches the line `redrive broker` logs once it listens.
var brokerAddr = regexp.MustCompile(`kafka broker listening.* addr=(\S+)`)

// startBroker runs `redrive broker` on a free port with topics seeded (3
// partitions each), so the broker's CPU and memory are not the bench's. It
// returns the broker's address. Extra flags go to the broker.
func startBroker(ctx context.Context, topics []string, flags ...string) (*process, string, error) {
	exe, err := self()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{"broker", "--port", "0", "--partitions", "3",
		"--auto-create-topics", "--topics", strings.Join(topics, ",")}, flags...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start redrive broker: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := brokerAddr.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr) // keep the pipe drained
	}()
	select {
	case a := <-addr:
		return p, a, nil
	case <-p.done:
		return nil, "", errors.New("redrive broker exited before it listened")
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, "", errors.New("redrive broker did not listen within 30 s")
	}
}

// rss is a process's resident set size in bytes, read from /proc.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}
