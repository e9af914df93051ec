// Package logtest collects what the code under test logs (or prints), for
// the test to look at while that code's goroutines go on writing.
//
// It is for tests only and imports nothing of Redrive.
package logtest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
)

// Buffer is an io.Writer safe for concurrent writers and readers: the sink
// of a test's logger, or a command's output. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TextLogger returns a logger writing text records of level and above to b.
func (b *Buffer) TextLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level}))
}

// JSONLogger returns a logger writing JSON records of level and above to b,
// one a line: what Find reads.
func (b *Buffer) JSONLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: level}))
}

// Count returns how often s stands in what was written.
func (b *Buffer) Count(s string) int { return strings.Count(b.String(), s) }

// Lines returns the lines written that contain s.
func (b *Buffer) Lines(s string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// Find returns the JSON records (see JSONLogger) whose msg contains msg and
// whose attributes include attrs; lines that are not JSON objects are
// passed over.
func (b *Buffer) Find(msg string, attrs map[string]any) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(b.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if s, _ := rec["msg"].(string); !strings.Contains(s, msg) {
			continue
		}
		match := true
		for k, v := range attrs {
			match = match && rec[k] == v
		}
		if match {
			out = append(out, rec)
		}
	}
	return out
}
