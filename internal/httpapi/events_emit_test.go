package httpapi_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Operator actions are published as lifecycle events (seen here on the SSE stream).
func TestOperatorActionsArePublishedAsEvents(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, rec{queue: "billing"}, rec{queue: "billing"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/ojs/v1/events?topic=billing", nil)
	req.Header.Set("Authorization", "Bearer "+readKey)
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed by the defer below; the stream is read on a goroutine
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The stream says ": connected" once its subscription is registered.
	select {
	case l := <-lines:
		if l != ": connected" {
			t.Fatalf("first line %q, want \": connected\"", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream never connected")
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/billing/pause", nil, nil), http.StatusOK)
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+ids[0]+"/retry", nil, nil), http.StatusOK)
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter/"+ids[1], nil, nil), http.StatusOK)
	want := []string{`"type":"queue.paused"`, `"type":"dead_letter.retried"`, `"type":"dead_letter.deleted"`}
	var seen []string
	for len(want) > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stream ended; missing %v", want)
			}
			if strings.HasPrefix(l, "data:") {
				seen = append(seen, l)
				if strings.Contains(l, want[0]) {
					want = want[1:]
				}
			}
		case <-ctx.Done():
			t.Fatalf("missing %v; saw %v", want, seen)
		}
	}
}
