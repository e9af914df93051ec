package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	env "github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/httpapi"
	"github.com/redrive/redrive/internal/idptest"
	"github.com/redrive/redrive/internal/kafkatest"
)

// The forbidden queue's records, as a caller limited to payments.* must
// never learn of them: names, keys, types, error types, values, counts.
const (
	hiddenQueue   = "secret.q"
	hiddenKey     = "k-hidden-7781"
	hiddenType    = "hidden.kind"
	hiddenErrType = "hidden.failure"
	hiddenValue   = "PAYLOAD-HIDDEN-7781"
	hiddenRule    = "hidden-rule"
	// hiddenCount records are seeded in the forbidden queue, shownCount in
	// the allowed one: a count of hiddenCount or of both is a leak.
	hiddenCount = 17
	shownCount  = 3
	shownQueue  = "payments.card"
)

// narrowFixture is what the cases name: an allowed and a forbidden record,
// incident and task.
type narrowFixture struct {
	shownID, hiddenID             string
	shownIncident, hiddenIncident string
	shownTask, hiddenTask         string
}

// moreNarrowCases add narrowCases from other files (a file that adds
// routes says there how they narrow), each in an init.
var moreNarrowCases []func(f *narrowFixture) map[string][]req

// narrowCases are, for every route the server registers, the calls a caller
// limited to payments.* makes to it, about its own queue and about the
// forbidden one. A route missing here fails TestNoRouteShowsAQueueBeyondTheCallersRoles:
// whoever adds one says here how it narrows.
func narrowCases(f *narrowFixture) map[string][]req {
	get := func(paths ...string) []req {
		var out []req
		for _, p := range paths {
			out = append(out, req{method: http.MethodGet, path: p})
		}
		return out
	}
	write := func(method string, bodies map[string]any) []req {
		var out []req
		for p, body := range bodies {
			out = append(out, req{method: method, path: p, body: body})
		}
		return out
	}
	const api = "/ojs/v1"
	recordPaths := func(suffix string) []string {
		return []string{api + "/dead-letter/" + f.shownID + suffix, api + "/dead-letter/" + f.hiddenID + suffix}
	}
	queuePaths := func(suffix string) []string {
		return []string{api + "/queues/" + shownQueue + suffix, api + "/queues/" + hiddenQueue + suffix}
	}
	cases := map[string][]req{
		"GET /ojs/v1/whoami": get(api + "/whoami"),
		"GET /ojs/v1/dead-letter": get(api+"/dead-letter", api+"/dead-letter?queue="+hiddenQueue,
			api+"/dead-letter?type="+hiddenType, api+"/dead-letter?error_type="+hiddenErrType, api+"/dead-letter?limit=1&state=discarded"),
		"GET /ojs/v1/dead-letter/stats":       get(api+"/dead-letter/stats", api+"/dead-letter/stats?queue="+hiddenQueue),
		"GET /ojs/v1/dead-letter/error-types": get(api+"/dead-letter/error-types", api+"/dead-letter/error-types?queue="+hiddenQueue),
		"GET /ojs/v1/dead-letter/filter-keys": get(api + "/dead-letter/filter-keys"),
		"GET /ojs/v1/dead-letter/export":      get(api+"/dead-letter/export?queue="+shownQueue, api+"/dead-letter/export", api+"/dead-letter/export?queue="+hiddenQueue),
		"POST /ojs/v1/dead-letter/import": {{method: http.MethodPost, path: api + "/dead-letter/import", rawBody: true,
			header: http.Header{"Content-Type": {"application/x-ndjson"}}, body: "{}\n"}},
		"POST /ojs/v1/dead-letter/retry": write(http.MethodPost, map[string]any{api + "/dead-letter/retry": map[string]any{"filter": map[string]any{}}}),
		"DELETE /ojs/v1/dead-letter": append(write(http.MethodDelete, map[string]any{api + "/dead-letter": map[string]any{"filter": map[string]any{"type": hiddenType}}}),
			req{method: http.MethodDelete, path: api + "/dead-letter", body: map[string]any{"filter": map[string]any{"ids": []string{f.hiddenID}}, "confirm": true}}),
		"GET /ojs/v1/dead-letter/:id":     get(recordPaths("")...),
		"GET /ojs/v1/dead-letter/:id/raw": get(recordPaths("/raw")...),
		"POST /ojs/v1/dead-letter/:id/retry": {{method: http.MethodPost, path: api + "/dead-letter/" + f.hiddenID + "/retry"},
			{method: http.MethodPost, path: api + "/dead-letter/" + f.hiddenID + "/retry", body: map[string]any{"override": map[string]any{"topic": shownQueue}}}},
		"POST /ojs/v1/dead-letter/:id/payload/check": {{method: http.MethodPost, path: api + "/dead-letter/" + f.hiddenID + "/payload/check", body: map[string]any{"value": "{}"}}},
		"DELETE /ojs/v1/dead-letter/:id":             {{method: http.MethodDelete, path: api + "/dead-letter/" + f.hiddenID}},

		"POST /ojs/v1/jobs":             write(http.MethodPost, map[string]any{api + "/jobs": map[string]any{"type": "email.send", "args": []any{}, "queue": hiddenQueue}}),
		"GET /ojs/v1/jobs/:id":          get(api+"/jobs/"+f.hiddenID, api+"/jobs/"+f.shownID),
		"POST /ojs/v1/workers/fetch":    write(http.MethodPost, map[string]any{api + "/workers/fetch": map[string]any{"queues": []string{hiddenQueue}, "worker_id": "w", "count": 5}}),
		"POST /ojs/v1/workers/ack":      write(http.MethodPost, map[string]any{api + "/workers/ack": map[string]any{"job_id": f.hiddenID}}),
		"POST /ojs/v1/workers/nack":     write(http.MethodPost, map[string]any{api + "/workers/nack": map[string]any{"job_id": f.hiddenID, "error": map[string]any{"message": "x"}}}),
		"GET /ojs/v1/tasks":             get(api+"/tasks", api+"/tasks?state=completed"),
		"GET /ojs/v1/tasks/:id":         get(api+"/tasks/"+f.hiddenTask, api+"/tasks/"+f.shownTask),
		"POST /ojs/v1/tasks/:id/cancel": {{method: http.MethodPost, path: api + "/tasks/" + f.hiddenTask + "/cancel"}},

		"GET /ojs/v1/queues":                 get(api+"/queues", api+"/queues?limit=1"),
		"POST /ojs/v1/queues":                write(http.MethodPost, map[string]any{api + "/queues": map[string]any{"name": "payments.new"}}),
		"GET /ojs/v1/queues/:name":           get(queuePaths("")...),
		"DELETE /ojs/v1/queues/:name":        {{method: http.MethodDelete, path: api + "/queues/" + hiddenQueue}},
		"GET /ojs/v1/queues/:name/config":    get(queuePaths("/config")...),
		"GET /ojs/v1/queues/:name/activity":  get(queuePaths("/activity")...),
		"PUT /ojs/v1/queues/:name/config":    write(http.MethodPut, map[string]any{api + "/queues/" + hiddenQueue + "/config": map[string]any{}}),
		"POST /ojs/v1/queues/:name/pause":    {{method: http.MethodPost, path: api + "/queues/" + hiddenQueue + "/pause"}},
		"POST /ojs/v1/queues/:name/resume":   {{method: http.MethodPost, path: api + "/queues/" + hiddenQueue + "/resume"}},
		"POST /ojs/v1/queues/:name/drain":    {{method: http.MethodPost, path: api + "/queues/" + hiddenQueue + "/drain"}},
		"GET /ojs/v1/incidents":              get(api+"/incidents", api+"/incidents?queue="+hiddenQueue),
		"GET /ojs/v1/incidents/:id":          get(api+"/incidents/"+f.hiddenIncident, api+"/incidents/"+f.shownIncident),
		"GET /ojs/v1/incidents/:id/activity": get(api+"/incidents/"+f.hiddenIncident+"/activity", api+"/incidents/"+f.shownIncident+"/activity"),
		"POST /ojs/v1/incidents/:id/redrive-when-quiet": write(http.MethodPost, map[string]any{
			api + "/incidents/" + f.hiddenIncident + "/redrive-when-quiet": map[string]any{"quiet": "PT5M"}}),
		"DELETE /ojs/v1/incidents/:id/redrive-when-quiet": {{method: http.MethodDelete, path: api + "/incidents/" + f.hiddenIncident + "/redrive-when-quiet"}},
		"GET /ojs/v1/activity":                            get(api+"/activity", api+"/activity?queue="+hiddenQueue),
		"GET /ojs/v1/audit":                               get(api + "/audit"),
		"GET /ojs/v1/events":                              nil, // a stream: read for the whole test (TestNoRouteShowsAQueueBeyondTheCallersRoles)

		"GET /ojs/v1/dead-letter/replay-rules":       get(api + "/dead-letter/replay-rules"),
		"GET /ojs/v1/dead-letter/replay-rules/:name": get(api + "/dead-letter/replay-rules/" + hiddenRule),
		"POST /ojs/v1/dead-letter/replay-rules": write(http.MethodPost, map[string]any{api + "/dead-letter/replay-rules": map[string]any{
			"name": "mine", "filter": map[string]any{"queue": shownQueue}, "delay": "PT1H", "max_replays": 1}}),
		"PUT /ojs/v1/dead-letter/replay-rules/:name": write(http.MethodPut, map[string]any{api + "/dead-letter/replay-rules/" + hiddenRule: map[string]any{
			"name": hiddenRule, "filter": map[string]any{"queue": shownQueue}, "delay": "PT1H", "max_replays": 1}}),
		"DELETE /ojs/v1/dead-letter/replay-rules/:name": {{method: http.MethodDelete, path: api + "/dead-letter/replay-rules/" + hiddenRule}},

		// The compatibility routes take an X-API-Key only; the person's
		// token is refused there, whatever it names.
		"GET /api/dlq/stats":               get("/api/dlq/stats"),
		"GET /api/dlq/jobs/:queue":         get("/api/dlq/jobs/" + hiddenQueue),
		"POST /api/dlq/requeue/:queue":     {{method: http.MethodPost, path: "/api/dlq/requeue/" + hiddenQueue}},
		"POST /api/dlq/requeue-all/:queue": {{method: http.MethodPost, path: "/api/dlq/requeue-all/" + hiddenQueue}},
		"DELETE /api/dlq/:queue":           {{method: http.MethodDelete, path: "/api/dlq/" + hiddenQueue}},
	}
	// The admin API's aliases (server.go adminAliased) narrow as the
	// routes they alias: the same calls, under /ojs/v1/admin.
	for _, k := range []string{"GET /dead-letter", "GET /dead-letter/stats", "POST /dead-letter/retry", "DELETE /dead-letter",
		"GET /dead-letter/:id", "POST /dead-letter/:id/retry", "DELETE /dead-letter/:id",
		"POST /queues/:name/pause", "POST /queues/:name/resume"} {
		method, path, _ := strings.Cut(k, " ")
		var rs []req
		for _, r := range cases[method+" "+api+path] {
			r.path = api + "/admin" + strings.TrimPrefix(r.path, api)
			rs = append(rs, r)
		}
		cases[method+" "+api+"/admin"+path] = rs
	}
	// HEAD answers as GET does.
	for k, rs := range cases {
		if strings.HasPrefix(k, "GET ") && k != "GET /ojs/v1/events" {
			var heads []req
			for _, r := range rs {
				r.method = http.MethodHead
				heads = append(heads, r)
			}
			cases["HEAD "+strings.TrimPrefix(k, "GET ")] = heads
		}
	}
	return cases
}

// For a person whose roles read payments.* alone, no route — every one the
// server registers, the event stream and the compatibility routes included;
// the console calls these — shows anything of another queue: its name, a
// record's id, key, type, error type or value, an incident, a task, a
// replay rule, or a count of its records, in a body, a header, an error
// message or a stream event. A call that writes touches nothing of it.
func TestNoRouteShowsAQueueBeyondTheCallersRoles(t *testing.T) {
	b, is := startOIDC(t)
	ann := is.UserToken(idptest.User{Subject: "u-ann", Email: "ann@example.com", Groups: []string{"payments"}})
	root := is.UserToken(idptest.User{Subject: "u-root", Email: "root@example.com", Groups: []string{"sre"}})

	var seeds []rec
	for range shownCount {
		seeds = append(seeds, rec{queue: shownQueue, typ: "card.charge", errType: "card.declined", key: "k-shown",
			state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, value: `{"n":1}`})
	}
	for range hiddenCount {
		seeds = append(seeds, rec{queue: hiddenQueue, typ: hiddenType, errType: hiddenErrType, key: hiddenKey,
			state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, value: `{"v":"` + hiddenValue + `"}`})
	}
	ids := b.seed(t, seeds...)
	f := &narrowFixture{shownID: ids[0], hiddenID: ids[shownCount]}
	hidden := []string{hiddenQueue, hiddenKey, hiddenType, hiddenErrType, hiddenValue, hiddenRule}
	hidden = append(hidden, ids[shownCount:]...)

	// The stream is open before anything of the forbidden queue happens.
	events := tokenOf(ann).openEvents(t, b)

	// Through ingest, so that both queues have an incident at once.
	cl := kafkatest.Client(t, b.brokers)
	for _, q := range []string{shownQueue, hiddenQueue} {
		kafkatest.Produce(t, cl, env.Encode(&kgo.Record{Topic: q, Key: []byte(map[string]string{shownQueue: "k-shown", hiddenQueue: hiddenKey}[q]),
			Value: []byte(`{}`), Headers: []kgo.RecordHeader{{Key: "redrive.type", Value: []byte(hiddenType)}}},
			env.FailureInfo{DLQTopic: dlqTopic, ErrorType: map[string]string{shownQueue: "card.declined", hiddenQueue: hiddenErrType}[q], Message: "failed " + q}))
	}
	incidentOf := func(queue string) string {
		var list struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		var id string
		eventually.True(t, "an incident of "+queue, func() bool {
			b.do(t, req{method: http.MethodGet, path: "/ojs/v1/incidents?queue=" + queue, key: root}).json(t, &list)
			if len(list.Items) > 0 {
				id = list.Items[0].ID
			}
			return id != ""
		}, eventually.Within(30*time.Second))
		return id
	}
	f.shownIncident, f.hiddenIncident = incidentOf(shownQueue), incidentOf(hiddenQueue)
	hidden = append(hidden, f.hiddenIncident)
	taskOf := func(key, queue string) string {
		var a struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		}
		r := b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/retry", key: key,
			body: map[string]any{"filter": map[string]any{"queue": queue, "error_type": "no.such.error"}, "confirm": true}})
		wantStatus(t, r, http.StatusAccepted)
		r.json(t, &a)
		return a.Task.ID
	}
	f.shownTask, f.hiddenTask = taskOf(ann, shownQueue), taskOf(root, hiddenQueue)
	hidden = append(hidden, f.hiddenTask)
	wantStatus(t, b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/replay-rules", key: root,
		body: map[string]any{"name": hiddenRule, "filter": map[string]any{"queue": hiddenQueue}, "delay": "PT1H", "max_replays": 1}}), http.StatusCreated)
	wantStatus(t, b.do(t, req{method: http.MethodPost, path: "/ojs/v1/queues/" + hiddenQueue + "/pause", key: root}), http.StatusOK)

	cases := narrowCases(f)
	for _, more := range moreNarrowCases {
		for route, rs := range more(f) {
			if _, dup := cases[route]; dup {
				t.Errorf("route %s has narrowCases twice", route)
			}
			cases[route] = rs
		}
	}
	// What the caller has sent, said back, tells it nothing: a forbidden
	// id it named, echoed in a 404 or in the filter of its own task.
	var sent strings.Builder
	for _, route := range httpapi.RouteKeys() {
		rs, ok := cases[route]
		if !ok {
			t.Errorf("route %s: add the calls that show how it narrows to narrowCases", route)
			continue
		}
		delete(cases, route)
		for _, r := range rs {
			r.key = ann
			got := b.do(t, r)
			sent.WriteString(r.path + fmt.Sprint(r.body) + "\n")
			for _, secret := range hidden {
				if strings.Contains(sent.String(), secret) {
					continue
				}
				if bytes.Contains(got.body, []byte(secret)) {
					t.Errorf("%s %s (%d) shows %q of the forbidden queue: %.600s", r.method, r.path, got.status, secret, got.body)
				}
				for name, vs := range got.header {
					if strings.Contains(strings.Join(vs, " "), secret) {
						t.Errorf("%s %s: header %s shows %q", r.method, r.path, name, secret)
					}
				}
			}
			if n, where := leakedCount(got.body); where != "" {
				t.Errorf("%s %s: %s is %d, a count of the forbidden queue's records: %.600s", r.method, r.path, where, n, got.body)
			}
		}
	}
	for route := range cases {
		t.Errorf("narrowCases names %s, which the server does not register", route)
	}

	// The stream: a sentinel of the allowed queue, published after all of
	// the above, ends the wait; nothing before it was of the other queue.
	wantStatus(t, b.do(t, req{method: http.MethodPost, path: "/ojs/v1/queues/" + shownQueue + "/pause", key: root}), http.StatusOK)
	for line := range events.until(t, `"queue":"`+shownQueue+`","state":"paused"`) {
		for _, secret := range hidden {
			if strings.Contains(line, secret) {
				t.Errorf("the event stream shows %q of the forbidden queue: %.400s", secret, line)
			}
		}
	}

	// The forbidden queue's records are all there, as they were.
	var stats struct {
		ByQueue map[string]int64 `json:"by_queue"`
	}
	b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/stats", key: root}).json(t, &stats)
	if stats.ByQueue[hiddenQueue] != hiddenCount+1 {
		t.Errorf("the forbidden queue holds %d records after the calls, want %d", stats.ByQueue[hiddenQueue], hiddenCount+1)
	}
	var r struct {
		State string `json:"state"`
	}
	b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/" + f.hiddenID, key: root}).json(t, &r)
	if r.State != string(dlq.StateDiscarded) {
		t.Errorf("the forbidden record is %q after the calls, want discarded", r.State)
	}
}

// leakedCount finds, in a JSON body, a count (a number under a key naming a
// total or a count) equal to the forbidden queue's records, alone or with
// the allowed queue's.
func leakedCount(body []byte) (int64, string) {
	// The forbidden queue's records, seeded and ingested, and with the
	// allowed queue's.
	leaks := map[int64]bool{hiddenCount: true, hiddenCount + 1: true, hiddenCount + shownCount: true,
		hiddenCount + shownCount + 1: true, hiddenCount + shownCount + 2: true}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return 0, ""
	}
	var walk func(path string, v any) (int64, string)
	walk = func(path string, v any) (int64, string) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if n, ok := e.(json.Number); ok {
					lk := strings.ToLower(k)
					counts := strings.Contains(lk, "total") || strings.Contains(lk, "count") || strings.Contains(lk, "affect") ||
						lk == "records" || lk == "matched" || lk == "n"
					if i, err := n.Int64(); err == nil && counts && leaks[i] {
						return i, path + "." + k
					}
				}
				if n, where := walk(path+"."+k, e); where != "" {
					return n, where
				}
			}
		case []any:
			for i, e := range x {
				if n, where := walk(fmt.Sprintf("%s[%d]", path, i), e); where != "" {
					return n, where
				}
			}
		}
		return 0, ""
	}
	return walk("", v)
}

// eventLines is an open event stream's data lines.
type eventLines struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{}
}

// openEvents opens GET /ojs/v1/events as the person and reads it until the
// test ends.
func (tok tokenOf) openEvents(t *testing.T, b *bundle) *eventLines {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/ojs/v1/events", nil)
	hreq.Header.Set("Authorization", "Bearer "+string(tok))
	hresp, err := (&http.Client{Transport: &http.Transport{}}).Do(hreq) //nolint:bodyclose // closed at cleanup; read on a goroutine
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hresp.Body.Close() })
	if hresp.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", hresp.StatusCode)
	}
	ev := &eventLines{more: make(chan struct{}, 1)}
	connected := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(hresp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if l == ": connected" {
				close(connected)
			}
			ev.mu.Lock()
			ev.lines = append(ev.lines, l)
			ev.mu.Unlock()
			select {
			case ev.more <- struct{}{}:
			default:
			}
		}
	}()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream never connected")
	}
	return ev
}

// until returns every line read up to and including the first holding
// sentinel, failing the test if none comes.
func (ev *eventLines) until(t *testing.T, sentinel string) func(yield func(string) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		ev.mu.Lock()
		for i, l := range ev.lines {
			if strings.Contains(l, sentinel) {
				lines := ev.lines[:i+1]
				ev.mu.Unlock()
				return func(yield func(string) bool) {
					for _, l := range lines {
						if !yield(l) {
							return
						}
					}
				}
			}
		}
		ev.mu.Unlock()
		select {
		case <-ev.more:
		case <-deadline:
			t.Fatalf("no event holding %s on the stream", sentinel)
		}
	}
}

// tokenOf is a person's bearer token, which opens streams.
type tokenOf string
