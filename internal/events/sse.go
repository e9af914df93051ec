package events

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// HeartbeatInterval is how often an idle SSE stream sends a comment line, so
// proxies keep it open and dead clients are noticed.
var HeartbeatInterval = 15 * time.Second

// MaxFilterValues bounds each filter parameter of a stream: at most this many
// topics, and at most this many types, counting every comma-separated value.
const MaxFilterValues = 100

// FilterError is a filter parameter ParseFilter refuses.
type FilterError struct {
	// Param is the query parameter: "type", "types", "topic", "queue" or
	// "queues".
	Param string
	// Msg says what is wrong and what is expected.
	Msg string
}

func (e *FilterError) Error() string { return e.Param + ": " + e.Msg }

// FilterParams are the query parameters ParseFilter reads.
var FilterParams = []string{"type", "types", "topic", "queue", "queues"}

// ParseFilter reads a filter from query values: type (alias types, the
// events spec's §6.4 name) and topic (aliases queue and queues), each
// repeatable or comma-separated. A type may be a prefix pattern, "job.*"
// (every known type starting "job."; "*" is every type: events spec §6.1).
// Unknown event types, patterns that match none, illegal topic names and
// more than MaxFilterValues values of types or of topics are a
// *FilterError naming the parameter.
func ParseFilter(q url.Values) (Filter, error) {
	var f Filter
	seen := map[Type]bool{}
	n := 0
	for _, param := range []string{"type", "types"} {
		ts, err := splitAll(nil, param, q[param])
		if err != nil {
			return f, err
		}
		if n += len(ts); n > MaxFilterValues {
			return f, tooMany(param)
		}
		for _, t := range ts {
			matched, err := typesOf(param, t)
			if err != nil {
				return f, err
			}
			for _, m := range matched {
				if !seen[m] {
					seen[m] = true
					f.Types = append(f.Types, m)
				}
			}
		}
	}
	for _, param := range []string{"topic", "queue", "queues"} {
		n := len(f.Queues)
		var err error
		if f.Queues, err = splitAll(f.Queues, param, q[param]); err != nil {
			return f, err
		}
		for _, name := range f.Queues[n:] {
			if p := dlq.TopicNameProblem(name); p != "" {
				return f, &FilterError{param, fmt.Sprintf("%q %s", clip(name), p)}
			}
		}
	}
	return f, nil
}

// typesOf is the known types a type value names: itself, or those a prefix
// pattern ("job.*", "*") matches.
func typesOf(param, t string) ([]Type, error) {
	if prefix, ok := strings.CutSuffix(t, "*"); ok && !strings.Contains(prefix, "*") {
		var out []Type
		for _, k := range Types {
			if strings.HasPrefix(string(k), prefix) {
				out = append(out, k)
			}
		}
		if len(out) == 0 {
			return nil, &FilterError{param, fmt.Sprintf("%q matches no event type (known: %s)", clip(t), knownTypes())}
		}
		return out, nil
	}
	if !Type(t).Valid() {
		return nil, &FilterError{param, fmt.Sprintf("unknown event type %q (known: %s; a prefix pattern such as job.* matches several)", clip(t), knownTypes())}
	}
	return []Type{Type(t)}, nil
}

func knownTypes() string {
	known := make([]string, len(Types))
	for i, k := range Types {
		known[i] = string(k)
	}
	return strings.Join(known, ", ")
}

func tooMany(param string) *FilterError {
	return &FilterError{param, fmt.Sprintf("at most %d values are allowed (without one, every %s matches)", MaxFilterValues, param)}
}

// clip shortens a value quoted back in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// splitAll appends the comma-separated values of vs to out, refusing more
// than MaxFilterValues in all.
func splitAll(out []string, param string, vs []string) ([]string, error) {
	for _, v := range vs {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			if len(out) == MaxFilterValues {
				return nil, tooMany(param)
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// DefaultWriteTimeout is how long one write to a stream may take before the
// stream is dropped.
const DefaultWriteTimeout = 10 * time.Second

// StreamOptions configure ServeSSE.
type StreamOptions struct {
	// WriteTimeout bounds each write (an event or a heartbeat) to the client:
	// a client that stops reading is dropped once its connection's buffers
	// are full and a write does not complete in time. Default: the broker's
	// StreamConfig.WriteTimeout.
	WriteTimeout time.Duration
	// Heartbeat is how often an idle stream sends a comment. Default
	// HeartbeatInterval.
	Heartbeat time.Duration
}

// ServeSSE streams the events of sub to w as Server-Sent Events until the
// request ends, the subscription ends (the broker shuts down, or the stream
// fell too far behind) or a write does not complete within the write timeout.
// It closes sub. Each event is
//
//	id: <event id>
//	event: <event type>
//	data: <OJS event envelope, JSON>
func ServeSSE(w http.ResponseWriter, r *http.Request, sub *Subscription, opts StreamOptions) error {
	defer sub.Close()
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = sub.b.limits.WriteTimeout
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = HeartbeatInterval
	}
	rc := http.NewResponseController(w)
	// write sends one chunk within the write timeout. A client that stops
	// reading fills the connection's buffers; the write then times out and
	// the stream ends, releasing its goroutine and connection.
	// Deadlines and heartbeats are network time: wall time, not a clock's.
	write := func(format string, args ...any) error {
		if err := rc.SetWriteDeadline(time.Now().Add(opts.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		_, err := fmt.Fprintf(w, format, args...)
		if err == nil {
			err = rc.Flush()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			sub.b.m.StreamsDropped.WithLabelValues("write_timeout").Inc()
		}
		if errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := write(": connected\n\n"); err != nil {
		return err
	}
	beat := time.NewTicker(opts.Heartbeat)
	defer beat.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return nil
		case <-beat.C:
			err = write(": heartbeat\n\n")
		case msg, ok := <-sub.C:
			if sub.Err() != nil {
				// Fallen too far behind: close the connection (a clean end
				// would let an HTTP/1.1 client keep it), so the client knows
				// the stream broke; it reconnects and reads the API for what
				// it missed.
				closeConn(rc)
				return nil
			}
			if !ok {
				return nil // the broker shut down
			}
			err = write("id: %s\nevent: %s\ndata: %s\n\n", msg.Event.ID, msg.Event.Type, msg.JSON)
		}
		if err != nil {
			return err
		}
	}
}

// closeConn closes an HTTP/1.x stream's connection. Over HTTP/2, where a
// connection cannot be taken over, returning from the handler ends the stream.
func closeConn(rc *http.ResponseController) {
	if conn, _, err := rc.Hijack(); err == nil {
		_ = conn.Close()
	}
}
