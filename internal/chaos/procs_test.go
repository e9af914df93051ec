package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/pgcluster"
	"github.com/redrive/redrive/internal/testdate"
)

// binary returns the redrive binary under test: REDRIVE_CHAOS_BIN when set
// (a prebuilt binary, e.g. with -race), else one built from this module into
// a temporary directory. The suite needs a real binary because it kills the
// process; an in-process App cannot be SIGKILLed.
func binary(ctx context.Context, t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("REDRIVE_CHAOS_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("REDRIVE_CHAOS_BIN: %v", err)
		}
		return bin
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building redrive needs the go command on PATH (or set REDRIVE_CHAOS_BIN to a built binary): %v", err)
	}
	out := filepath.Join(t.TempDir(), "redrive")
	start := testdate.Now()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, "github.com/redrive/redrive/cmd/redrive")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build redrive: %v\n%s", err, b)
	}
	t.Logf("built %s in %v", out, testdate.Since(start).Round(time.Millisecond))
	return out
}

// childAttr makes a child process die with the test binary, so that a test
// timeout or panic leaves no broker or serve behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// broker is `redrive broker` running as a child process.
type broker struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

// startBroker runs `redrive broker` on a free port with the topics created and
// returns once it has logged its address.
func startBroker(ctx context.Context, t *testing.T, bin, logDir string, topics []string) *broker {
	t.Helper()
	logPath := filepath.Join(logDir, "broker.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create broker log: %v", err)
	}
	b := &broker{done: make(chan struct{})}
	// Not CommandContext: the broker must outlive ctx's cancellation until
	// the cleanup has stopped serve.
	b.cmd = exec.Command(bin, "broker", "--port", "0", "--partitions", "3", "--topics", strings.Join(topics, ","))
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.SysProcAttr = childAttr()
	if err := b.cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatalf("start redrive broker: %v", err)
	}
	go func() { _ = b.cmd.Wait(); _ = logf.Close(); close(b.done) }()
	t.Cleanup(func() { b.stop(t) })

	eventually.Nil(t, "redrive broker to log its address", func() error {
		if b.addr = logValue(logPath, "kafka broker listening", "addr"); b.addr != "" {
			return nil
		}
		select {
		case <-b.done:
			t.Fatalf("redrive broker exited at start: %s", tail(logPath, 20))
		default:
		}
		if ctx.Err() != nil {
			t.Fatalf("redrive broker not started: %v", ctx.Err())
		}
		return fmt.Errorf("its log ends:\n%s", tail(logPath, 20))
	}, eventually.Within(20*time.Second))
	return b
}

// stop ends the broker with SIGTERM, as an operator would.
func (b *broker) stop(t *testing.T) {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
		if code := b.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("redrive broker exited with %d after SIGTERM, want 0", code)
		}
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
		t.Errorf("redrive broker did not stop within 10s of SIGTERM")
	}
}

// logValue returns the value of key on the first slog text line of the file
// with message msg, or "".
func logValue(path, msg, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `msg="`+msg+`"`) {
			continue
		}
		for _, field := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(field, key+"="); ok {
				return v
			}
		}
	}
	return ""
}

// tail returns the last n lines of a log file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "\n" + strings.Join(lines, "\n")
}

// freeAddr returns a loopback address with a port free now, below the
// kernel's ephemeral range when it can: serve binds it again on every
// restart, and in the moment between two processes an ephemeral port could
// be handed to another socket (another package's test, a client connection).
func freeAddr(t *testing.T) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	for try := 0; try < 50 && low > 12000; try++ {
		addr := fmt.Sprintf("127.0.0.1:%d", 10000+rand.IntN(low-11000))
		if ln, err := net.Listen("tcp", addr); err == nil {
			_ = ln.Close()
			return addr
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// startPostgres starts a throwaway cluster with an empty database "redrive"
// (serve migrates it) and returns the cluster and the database's URL.
func startPostgres(ctx context.Context, t *testing.T) (*pgcluster.Cluster, string) {
	t.Helper()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Fatalf("the chaos suite needs the PostgreSQL server binaries (Debian: apt-get install postgresql): %v", err)
	}
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	t.Cleanup(c.Stop)
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE redrive"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return c, c.URL("redrive")
}

// serveProc keeps `redrive serve` running: it starts it again whenever it
// exits, until stop. kill SIGKILLs the running process.
type serveProc struct {
	bin     string
	env     []string
	logPath string
	logf    *os.File

	mu       sync.Mutex
	cmd      *exec.Cmd
	gen      int       // how many processes were started
	started  time.Time // when the current one started
	killed   bool      // the current process was killed on purpose
	stopping bool
	exits    []exitEvent // processes that exited without being killed
	starts   int

	loopDone chan struct{}
	exited   chan struct{} // closed when the current process exits
}

// exitEvent is a serve process that exited on its own.
type exitEvent struct {
	gen  int
	at   time.Time
	code int
}

// startServe runs serve with env and keeps it running until the test ends.
func startServe(t *testing.T, bin, logDir string, env []string) *serveProc {
	t.Helper()
	logPath := filepath.Join(logDir, "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create serve log: %v", err)
	}
	s := &serveProc{bin: bin, env: env, logPath: logPath, logf: logf, loopDone: make(chan struct{})}
	if err := s.spawn(); err != nil {
		t.Fatalf("start redrive serve: %v", err)
	}
	go s.loop()
	return s
}

var errStopping = errors.New("serve is stopping")

// spawn starts one serve process. The caller holds no lock.
func (s *serveProc) spawn() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return errStopping
	}
	s.gen++
	fmt.Fprintf(s.logf, "=== chaos: serve #%d starting at %s\n", s.gen, testdate.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(s.bin, "serve")
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = s.logf, s.logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start serve #%d: %w", s.gen, err)
	}
	s.starts++
	s.cmd, s.started, s.killed = cmd, testdate.Now(), false
	s.exited = make(chan struct{})
	return nil
}

// loop waits for each process and starts the next one, at once after a kill
// (the point of the suite is a crash followed by a restart), after a short
// pause after an exit of its own (e.g. it could not reach Postgres at start).
func (s *serveProc) loop() {
	defer close(s.loopDone)
	for {
		s.mu.Lock()
		cmd, exited := s.cmd, s.exited
		s.mu.Unlock()
		err := cmd.Wait()
		s.mu.Lock()
		close(exited)
		stopping, killed, gen := s.stopping, s.killed, s.gen
		if !stopping && !killed {
			code := -1
			if cmd.ProcessState != nil {
				code = cmd.ProcessState.ExitCode()
			}
			s.exits = append(s.exits, exitEvent{gen: gen, at: testdate.Now(), code: code})
			fmt.Fprintf(s.logf, "=== chaos: serve #%d exited on its own: %v\n", gen, err)
		}
		s.mu.Unlock()
		if stopping {
			return
		}
		if !killed {
			time.Sleep(500 * time.Millisecond)
		}
		for {
			err := s.spawn()
			if errors.Is(err, errStopping) {
				return
			}
			if err == nil {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// kill SIGKILLs the running serve process and returns when it is dead (the
// loop then starts the next one), with the time the signal was sent and the
// generation killed.
func (s *serveProc) kill() (time.Time, int, error) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return time.Time{}, 0, errors.New("serve is stopping")
	}
	cmd, exited, gen := s.cmd, s.exited, s.gen
	s.killed = true
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.mu.Unlock()
		return time.Time{}, 0, fmt.Errorf("kill serve #%d: %w", gen, err)
	}
	at := testdate.Now()
	fmt.Fprintf(s.logf, "=== chaos: serve #%d killed (SIGKILL) at %s\n", gen, at.UTC().Format(time.RFC3339Nano))
	s.mu.Unlock()
	<-exited
	return at, gen, nil
}

// note writes a marker line into serve's log, so that its errors can be read
// next to what the suite did at the time.
func (s *serveProc) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopping {
		fmt.Fprintf(s.logf, "=== chaos: %s at %s\n", fmt.Sprintf(format, args...), testdate.Now().UTC().Format(time.RFC3339Nano))
	}
}

// current returns the generation of the running process and when it started.
func (s *serveProc) current() (int, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.started
}

// stop ends serve with SIGTERM and reports its exit code (-1: it had to be
// killed after grace).
func (s *serveProc) stop(grace time.Duration) int {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		<-s.loopDone
		return 0
	}
	s.stopping = true
	cmd, exited := s.cmd, s.exited
	_ = cmd.Process.Signal(syscall.SIGTERM)
	fmt.Fprintf(s.logf, "=== chaos: serve #%d sent SIGTERM at %s\n", s.gen, testdate.Now().UTC().Format(time.RFC3339Nano))
	s.mu.Unlock()
	code := 0
	select {
	case <-exited:
		code = cmd.ProcessState.ExitCode()
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
		code = -1
	}
	<-s.loopDone
	_ = s.logf.Close()
	return code
}

// selfExits returns the processes that exited without being killed.
func (s *serveProc) selfExits() []exitEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]exitEvent(nil), s.exits...)
}

// serveEnv is the environment of serve: the parent's without any REDRIVE_*
// (a developer's own settings must not leak in), plus settings.
func serveEnv(settings map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDRIVE_") {
			env = append(env, kv)
		}
	}
	for k, v := range settings {
		env = append(env, k+"="+v)
	}
	return env
}
