package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/service"
)

// Resolver gives the effective configuration of a topic (and record type).
// *Set implements it; so do Watcher and the API's overlay of queue configs.
type Resolver interface {
	Resolve(topic, typ string) Topic
}

// Watcher holds the current policy Set of a directory and reloads it when the
// files change (polled) or when asked (SIGHUP). A reload that fails keeps the
// last good Set and says why; nothing is half-applied.
//
// Polling rather than inotify: Kubernetes updates ConfigMap mounts by swapping
// a symlink, which inotify watchers routinely miss, and a stat of a few files
// every couple of seconds costs nothing.
type Watcher struct {
	dir      string
	reserved dlq.ReservedTopics
	log      *slog.Logger
	current  atomic.Pointer[Set]
	mu       sync.Mutex // serialises reloads
	sum      string     // fingerprint of the files the current Set was loaded from
	lastErr  atomic.Pointer[error]
	onReload func(*Set)
	limits   Limits
}

// NewWatcher loads dir and returns a Watcher holding it. An empty dir means no
// policy files: every topic gets the system defaults. The first load must succeed.
// Retry policies are checked against DefaultLimits (see Limits.NewWatcher). A
// redelivery.target_topic naming one of the reserved topics (Redrive's own,
// or Kafka's internal ones) makes a load fail (Set.CheckTargets).
func NewWatcher(dir string, reserved dlq.ReservedTopics, logger *slog.Logger) (*Watcher, error) {
	return DefaultLimits().NewWatcher(dir, reserved, logger)
}

// NewWatcher is the package's NewWatcher, loading within l.
func (l Limits) NewWatcher(dir string, reserved dlq.ReservedTopics, logger *slog.Logger) (*Watcher, error) {
	if logger == nil {
		logger = slog.Default()
	}
	w := &Watcher{dir: dir, reserved: reserved, log: logger.With("component", "policy"), limits: l}
	if dir == "" {
		w.current.Store(nil)
		return w, nil
	}
	if err := w.Reload(); err != nil {
		return nil, err
	}
	return w, nil
}

// Current returns the Set in force (nil means system defaults for everything).
func (w *Watcher) Current() *Set { return w.current.Load() }

// Resolve resolves topic and typ against the Set in force.
func (w *Watcher) Resolve(topic, typ string) Topic { return w.Current().Resolve(topic, typ) }

// LastError is the error of the latest failed reload, or nil when the files on
// disk are the ones in force.
func (w *Watcher) LastError() error {
	if p := w.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// OnReload registers f to be called with each newly loaded Set.
func (w *Watcher) OnReload(f func(*Set)) { w.onReload = f }

// Reload loads the directory again. On error the current Set stays in force.
func (w *Watcher) Reload() error {
	if w.dir == "" {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	sum, _ := fingerprint(w.dir)
	set, err := w.limits.LoadDir(w.dir)
	if err == nil {
		err = set.CheckTargets(w.reserved)
	}
	if err != nil {
		w.lastErr.Store(&err)
		w.sum = sum // do not retry the same broken files on every poll
		if w.current.Load() != nil {
			w.log.Error("policy reload failed; keeping the last good policies", "dir", w.dir, "err", err)
		}
		return err
	}
	w.lastErr.Store(nil)
	w.sum = sum
	w.current.Store(set)
	w.log.Info("policies loaded", "dir", w.dir, "files", len(set.Files()))
	if w.onReload != nil {
		w.onReload(set)
	}
	return nil
}

// Poller is the service that polls the directory every interval on clk and
// reloads when its files change. Without a directory it has nothing to do.
func (w *Watcher) Poller(interval time.Duration, clk clock.Clock) service.Service {
	return service.NewLoop("policy files", &service.Loop{Clock: clk, Logger: w.log, Interval: interval, Delay: true,
		Pass: func(context.Context) (service.Next, error) {
			if w.dir == "" {
				return service.Next{Done: true}, nil
			}
			sum, err := fingerprint(w.dir)
			w.mu.Lock()
			changed := err == nil && sum != w.sum
			w.mu.Unlock()
			if changed {
				_ = w.Reload() // a broken file keeps the last good Set; Reload says why
			}
			return service.Next{}, nil
		}})
}

// fingerprint hashes the names, sizes and modification times of the policy
// files in dir (following symlinks).
func fingerprint(dir string) (string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read policy dir: %w", err)
	}
	var lines []string
	for _, de := range des {
		name := de.Name()
		ext := filepath.Ext(name)
		if strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s %d %d", name, fi.Size(), fi.ModTime().UnixNano()))
	}
	slices.Sort(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:]), nil
}
