package events

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// HeartbeatInterval is how often an idle SSE stream sends a comment line, so
// proxies keep it open and dead clients are noticed.
var HeartbeatInterval = 15 * time.Second

// ParseFilter reads an SSE filter from query values: type and topic (alias
// queue), each repeatable or comma-separated. Unknown event types are an error
// naming the parameter.
func ParseFilter(types, topics []string) (Filter, error) {
	var f Filter
	for _, t := range splitAll(types) {
		if !Type(t).Valid() {
			known := make([]string, len(Types))
			for i, k := range Types {
				known[i] = string(k)
			}
			return f, fmt.Errorf("type: unknown event type %q (known: %s)", t, strings.Join(known, ", "))
		}
		f.Types = append(f.Types, Type(t))
	}
	f.Queues = splitAll(topics)
	return f, nil
}

func splitAll(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// ServeSSE streams the events matching f to w as Server-Sent Events until the
// request ends or the broker shuts down. Each event is
//
//	id: <event id>
//	event: <event type>
//	data: <OJS event envelope, JSON>
//
// A nil broker (events not configured) answers 503.
func ServeSSE(w http.ResponseWriter, r *http.Request, b *Broker, f Filter) error {
	if b == nil {
		http.Error(w, "events are not available", http.StatusServiceUnavailable)
		return nil
	}
	rc := http.NewResponseController(w)
	sub := b.Subscribe(f)
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, ": connected\n\n"); err != nil {
		return err
	}
	if err := rc.Flush(); err != nil {
		return err
	}
	beat := time.NewTicker(HeartbeatInterval)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return err
			}
		case msg, ok := <-sub.C:
			if !ok {
				return nil
			}
			if _, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", msg.Event.ID, msg.Event.Type, msg.JSON); err != nil {
				return err
			}
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
	}
}
