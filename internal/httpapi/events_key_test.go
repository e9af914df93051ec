package httpapi_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	env "github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/kafkatest"
)

// eventJSON is a lifecycle event as the stream sends it.
type eventJSON struct {
	Type string `json:"type"`
	Data struct {
		ID           string  `json:"id"`
		Key          *string `json:"key"`
		KeyEncoding  string  `json:"key_encoding"`
		KeySize      int     `json:"key_size"`
		KeyTruncated bool    `json:"key_truncated"`
	} `json:"data"`
}

// stream opens the event stream of query and returns its events.
func (b *bundle) stream(t *testing.T, query string) <-chan eventJSON {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/ojs/v1/events?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+readKey)
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed at cleanup; read on a goroutine
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	out := make(chan eventJSON, 1000)
	connected := make(chan struct{})
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			l := sc.Text()
			if l == ": connected" {
				close(connected)
			}
			if data, ok := strings.CutPrefix(l, "data: "); ok {
				var ev eventJSON
				if json.Unmarshal([]byte(data), &ev) == nil {
					out <- ev
				}
			}
		}
	}()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream never connected")
	}
	return out
}

// Record events carry the start of the record key, shaped as the list's
// previews: UTF-8 cut at a character boundary, binary keys in base64, the
// whole size, no key fields for a null key; from ingest, a retry, a delete,
// a bulk retry and a purge alike.
func TestRecordEventsCarryTheKey(t *testing.T) {
	b := setup(t)
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/billing/pause", nil, nil), http.StatusOK)
	events := b.stream(t, "topic=billing")
	long := strings.Repeat("é", 100) // 200 bytes: cut at 128, on a character boundary
	binary := string([]byte{0, 1, 2, 0xff, 0xfe})
	ids := b.seed(t, rec{queue: "billing", key: "order-17"}, rec{queue: "billing", key: long}, rec{queue: "billing", key: binary},
		rec{queue: "billing"}, rec{queue: "billing", key: "purged-1"})
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+ids[0]+"/retry", nil, nil), http.StatusOK)
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter/"+ids[1], nil, nil), http.StatusOK)
	var a bulkAnswer
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry",
		map[string]any{"filter": map[string]any{"ids": []string{ids[2], ids[3]}}, "confirm": true}, &a), http.StatusAccepted)
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter",
		map[string]any{"filter": map[string]any{"ids": []string{ids[4]}}, "confirm": true}, &a), http.StatusAccepted)
	cl := kafkatest.Client(t, b.brokers)
	kafkatest.Produce(t, cl, env.Encode(&kgo.Record{Topic: "billing", Key: []byte("ingested-9"), Value: []byte(`{}`)},
		env.FailureInfo{DLQTopic: dlqTopic, ErrorType: "db.down", Message: "down"}))

	type want struct {
		typ, key, enc string
		size          int
		cut           bool
	}
	wants := map[string]want{
		ids[0]:   {"dead_letter.retried", "order-17", "utf8", 8, false},
		ids[1]:   {"dead_letter.deleted", strings.Repeat("é", 64), "utf8", 200, true},
		ids[2]:   {"dead_letter.retried", base64.StdEncoding.EncodeToString([]byte(binary)), "base64", 5, false},
		ids[3]:   {"dead_letter.retried", "", "", 0, false},
		ids[4]:   {"dead_letter.deleted", "purged-1", "utf8", 8, false},
		"ingest": {"dead_letter.added", "ingested-9", "utf8", 10, false},
	}
	deadline := time.After(30 * time.Second)
	for len(wants) > 0 {
		var ev eventJSON
		select {
		case ev = <-events:
		case <-deadline:
			t.Fatalf("no event for %v", wants)
		}
		id := ev.Data.ID
		if ev.Type == "dead_letter.added" {
			id = "ingest"
		}
		w, ok := wants[id]
		if !ok || w.typ != ev.Type {
			continue
		}
		delete(wants, id)
		got := want{ev.Type, "", ev.Data.KeyEncoding, ev.Data.KeySize, ev.Data.KeyTruncated}
		if ev.Data.Key != nil {
			got.key = *ev.Data.Key
		}
		if got != w {
			t.Errorf("%s of %s: key %+v, want %+v", ev.Type, id, got, w)
		}
		if w.key == "" && ev.Data.Key != nil {
			t.Errorf("%s of a record without a key: key %q", ev.Type, *ev.Data.Key)
		}
	}
}
