// Package pgcluster starts a throwaway PostgreSQL cluster from the local
// PostgreSQL binaries: the database behind `redrive dev` and the test harness.
//
// The cluster listens on a unix socket only (no port clashes between test
// binaries), runs with durability off, and is removed on Stop. It is for
// development and tests; it must never be used for data that matters.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is returned when no PostgreSQL server binaries can be found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found (initdb, postgres)")

// Cluster is a running throwaway PostgreSQL cluster.
type Cluster struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	logf *os.File
}

// Options tune a throwaway cluster. The zero value is fine.
type Options struct {
	// BinDir holds initdb and postgres. Default: found on PATH, else the newest
	// /usr/lib/postgresql/*/bin.
	BinDir string
	// Settings are extra `-c name=value` server settings.
	Settings map[string]string
	// Env is added to the server process's environment (the tests preload
	// datefudge through it to move the server's clock).
	Env []string
}

// FindBinDir returns the directory holding initdb and postgres.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first: "9" sorts after "15" as text, so sort numerically.
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func majorOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start initialises and starts a cluster in a fresh temporary directory.
// When running as root it drops to the `postgres` user, since initdb refuses root.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin := opts.BinDir
	if bin == "" {
		var err error
		if bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	// A short path: unix socket paths are limited to ~107 bytes.
	dir, err := os.MkdirTemp("", "rdpg")
	if err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	c := &Cluster{dir: dir, done: make(chan struct{})}
	if err := c.start(ctx, bin, cred, opts); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, bin string, cred *syscall.Credential, opts Options) error {
	if cred != nil {
		if err := os.Chown(c.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("chown cluster dir: %w", err)
		}
	}
	data := filepath.Join(c.dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}

	args := []string{"-D", data, "-k", c.dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=128MB"}
	for k, v := range opts.Settings {
		args = append(args, "-c", k+"="+v)
	}
	logf, err := os.Create(filepath.Join(c.dir, "postgres.log"))
	if err != nil {
		return fmt.Errorf("create server log: %w", err)
	}
	c.logf = logf
	// Not CommandContext(ctx): ctx bounds the start, the server outlives it.
	c.cmd = exec.CommandContext(context.WithoutCancel(ctx), filepath.Join(bin, "postgres"), args...)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if len(opts.Env) > 0 {
		c.cmd.Env = append(os.Environ(), opts.Env...)
	}
	// Pdeathsig: if this process dies without calling Stop, the server goes too.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	return c.waitReady(ctx)
}

// waitReady waits until the server answers queries: it accepts connections
// on its socket before it has finished starting up.
func (c *Cluster) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited during start: %s", c.logTail())
		case <-ctx.Done():
			c.Stop()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if conn, err := pgx.Connect(ctx, c.URL("postgres")); err == nil {
			_ = conn.Close(ctx)
			return nil
		}
	}
	c.Stop()
	return fmt.Errorf("postgres did not start within 30s: %s", c.logTail())
}

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// URL returns a connection URL for database db as the postgres superuser.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&sslmode=disable", db, c.dir)
}

// SocketDir is the directory holding the server's unix socket (psql -h DIR).
func (c *Cluster) SocketDir() string { return c.dir }

// Stop shuts the server down (fast shutdown) and removes its directory.
func (c *Cluster) Stop() {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	if c.logf != nil {
		_ = c.logf.Close()
	}
	_ = os.RemoveAll(c.dir)
}

// Pause stops the server without removing its data, for outage tests;
// Resume starts it again on the same socket.
func (c *Cluster) Pause() error {
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	<-c.done
	return nil
}

// Resume restarts a server stopped by Pause.
func (c *Cluster) Resume(ctx context.Context) error {
	old := c.cmd
	c.done = make(chan struct{})
	c.cmd = exec.CommandContext(context.WithoutCancel(ctx), old.Path, old.Args[1:]...)
	c.cmd.Stdout, c.cmd.Stderr = c.logf, c.logf
	c.cmd.Env = old.Env
	c.cmd.SysProcAttr = old.SysProcAttr
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	return c.waitReady(ctx)
}

// serverCredential returns the credential to run the server with: nil when not
// root, else the `postgres` user's.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and initdb refuses root; no `postgres` user to run it as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
