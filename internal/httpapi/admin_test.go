package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/idptest"
)

// The OJS admin API (ojs-admin-api.md; docs/api.md#admin).

func init() {
	// How the admin routes narrow for a caller limited to payments.*
	// (TestNoRouteShowsAQueueBeyondTheCallersRoles).
	moreNarrowCases = append(moreNarrowCases, func(f *narrowFixture) map[string][]req {
		const admin = "/ojs/v1/admin"
		get := func(paths ...string) []req {
			var out []req
			for _, p := range paths {
				out = append(out, req{method: http.MethodGet, path: p})
			}
			return out
		}
		head := func(rs []req) []req {
			var out []req
			for _, r := range rs {
				r.method = http.MethodHead
				out = append(out, r)
			}
			return out
		}
		cases := map[string][]req{
			"GET /ojs/v1/admin/stats":        get(admin + "/stats"),
			"GET /ojs/v1/admin/queues":       get(admin+"/queues", admin+"/queues?per_page=1&page=2"),
			"GET /ojs/v1/admin/queues/:name": get(admin+"/queues/"+shownQueue, admin+"/queues/"+hiddenQueue),
			"GET /ojs/v1/admin/jobs": get(admin+"/jobs", admin+"/jobs?queue="+hiddenQueue, admin+"/jobs?state=discarded",
				admin+"/jobs?type="+hiddenType, admin+"/jobs?type=hidden.*"),
			"GET /ojs/v1/admin/jobs/:id":     get(admin+"/jobs/"+f.hiddenID, admin+"/jobs/"+f.shownID),
			"GET /ojs/v1/queues/:name/stats": get("/ojs/v1/queues/"+shownQueue+"/stats", "/ojs/v1/queues/"+hiddenQueue+"/stats"),
			"POST /ojs/v1/admin/jobs/bulk/retry": {{method: http.MethodPost, path: admin + "/jobs/bulk/retry",
				body: map[string]any{"filter": map[string]any{"state": "discarded", "type": "no.such.type"}, "confirm": true}}},
			"PUT /ojs/v1/admin/queues/:name/config": {{method: http.MethodPut, path: admin + "/queues/" + hiddenQueue + "/config",
				body: map[string]any{"backpressure": map[string]any{"max_depth": 1}}}},
		}
		for k, rs := range cases {
			if method, path, _ := strings.Cut(k, " "); method == http.MethodGet {
				cases["HEAD "+path] = head(rs)
			}
		}
		return cases
	})
}

type jobCounts struct {
	Available, Active, Scheduled, Retryable, Completed, Discarded, Cancelled int64
}

type adminQueue struct {
	Name       string
	State      string
	Status     string
	Paused     bool
	Counts     jobCounts
	Depth      int64
	CreatedAt  *string `json:"created_at"`
	Throughput struct {
		ProcessedPerMinute float64 `json:"processed_per_minute"`
		FailedPerMinute    float64 `json:"failed_per_minute"`
	}
}

type adminPagination struct {
	Total   int64 `json:"total"`
	Page    int   `json:"page"`
	PerPage int   `json:"per_page"`
	HasMore bool  `json:"has_more"`
}

type adminJob struct {
	ID, Type, Queue, State string
	Attempt                int
	ScheduledAt            *string `json:"scheduled_at"`
}

// adminScene seeds, as the admin API counts them (admin spec §6.1,
// §10.1): in orders (records read from Kafka) 2 retryable, 1 available, 3
// completed, 4 dead letters and 1 cancelled; in emails (jobs published over
// HTTP) 1 available, 1 active (fetched) and 1 scheduled (due later).
type adminScene struct {
	orders                     []string
	active, scheduled, waiting string
	cancelled                  string
}

func seedAdmin(t *testing.T, w *workerBundle) *adminScene {
	t.Helper()
	s := &adminScene{}
	s.orders = w.seed(t, rec{state: dlq.StateRetryable}, rec{state: dlq.StateRetryable}, rec{state: dlq.StateAvailable},
		rec{state: dlq.StateCompleted}, rec{state: dlq.StateCompleted}, rec{state: dlq.StateCompleted},
		rec{}, rec{}, rec{}, rec{}, rec{state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionCancelled})
	s.cancelled = s.orders[10]
	var ids []string
	for range 3 {
		ids = append(ids, w.publish(t, map[string]any{"type": "email.send", "queue": "emails", "args": []any{1}}).ID)
	}
	var fetched struct{ Jobs []jobView }
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"emails"}, "worker_id": "w-1", "count": 1},
		&fetched), http.StatusOK)
	if len(fetched.Jobs) != 1 {
		t.Fatalf("fetched %+v", fetched.Jobs)
	}
	s.active = fetched.Jobs[0].ID
	for _, id := range ids {
		if id != s.active && s.scheduled == "" {
			s.scheduled = id
		} else if id != s.active {
			s.waiting = id
		}
	}
	if _, err := w.pool.Exec(context.Background(), "UPDATE redrive_lifecycle SET fetch_at = $2 WHERE id = $1",
		s.scheduled, w.clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return s
}

// GET /admin/stats counts the jobs by OJS state from the statistics table
// and the lifecycle (admin spec §10.1): Redrive's available splits into
// available, active (held by a worker) and scheduled (due later), its
// discarded into discarded and cancelled; rates are over the last five
// minutes.
func TestAdminStatsCountsJobsByOJSState(t *testing.T) {
	w := setupWorkers(t)
	seedAdmin(t, w)
	var st struct {
		Queues     *int64
		Workers    *int64
		Jobs       jobCounts
		Throughput struct {
			ProcessedPerMinute *float64 `json:"processed_per_minute"`
			FailedPerMinute    *float64 `json:"failed_per_minute"`
			WindowSeconds      int      `json:"window_seconds"`
		}
		UptimeSeconds *int64 `json:"uptime_seconds"`
	}
	wantStatus(t, w.get(t, "/ojs/v1/admin/stats", &st), http.StatusOK)
	want := jobCounts{Available: 2, Active: 1, Scheduled: 1, Retryable: 2, Completed: 3, Discarded: 4, Cancelled: 1}
	if st.Jobs != want {
		t.Errorf("jobs %+v, want %+v", st.Jobs, want)
	}
	// orders and emails have records; payments is declared in a file.
	if st.Queues == nil || *st.Queues != 3 {
		t.Errorf("queues %v, want 3", st.Queues)
	}
	if st.Workers == nil || *st.Workers < 0 || st.UptimeSeconds == nil || *st.UptimeSeconds < 0 {
		t.Errorf("workers %v, uptime_seconds %v", st.Workers, st.UptimeSeconds)
	}
	// 3 records completed in the window of 5 minutes: 0.6 a minute.
	tp := st.Throughput
	if tp.ProcessedPerMinute == nil || *tp.ProcessedPerMinute != 0.6 || tp.FailedPerMinute == nil || tp.WindowSeconds != 300 {
		t.Errorf("throughput %+v", tp)
	}
	// Every seeded record failed just now: 11 in 5 minutes.
	if f := tp.FailedPerMinute; f != nil && *f != 2.2 {
		t.Errorf("failed_per_minute %v, want 2.2 (11 failures in 5 minutes)", *f)
	}
}

// GET /admin/queues lists every queue with its counts per state (admin
// spec §6.1, ADM-001), paged by page and per_page; GET /admin/queues/{name}
// one of them with its configuration (§6.2); GET /queues/{name}/stats its
// statistics and depth (HTTP binding §11.2, backpressure spec §3).
func TestAdminQueuesCountPerState(t *testing.T) {
	w := setupWorkers(t)
	seedAdmin(t, w)
	var list struct {
		Items      []adminQueue
		Pagination adminPagination
	}
	wantStatus(t, w.get(t, "/ojs/v1/admin/queues", &list), http.StatusOK)
	var names []string
	for _, q := range list.Items {
		names = append(names, q.Name)
	}
	if !slices.Equal(names, []string{"emails", "orders", "payments"}) ||
		list.Pagination != (adminPagination{Total: 3, Page: 1, PerPage: 20}) {
		t.Fatalf("queues %v, pagination %+v", names, list.Pagination)
	}
	emails, orders := list.Items[0], list.Items[1]
	if emails.Counts != (jobCounts{Available: 1, Active: 1, Scheduled: 1}) || emails.Depth != 2 || emails.State != "active" ||
		emails.Status != "active" || emails.Paused || emails.CreatedAt == nil {
		t.Errorf("emails %+v", emails)
	}
	if orders.Counts != (jobCounts{Available: 1, Retryable: 2, Completed: 3, Discarded: 4, Cancelled: 1}) || orders.Depth != 3 ||
		orders.Throughput.ProcessedPerMinute != 0.6 {
		t.Errorf("orders %+v", orders)
	}
	wantStatus(t, w.get(t, "/ojs/v1/admin/queues?per_page=2&page=2", &list), http.StatusOK)
	if len(list.Items) != 1 || list.Items[0].Name != "payments" || list.Pagination != (adminPagination{Total: 3, Page: 2, PerPage: 2}) {
		t.Errorf("page 2: %+v", list)
	}
	wantStatus(t, w.get(t, "/ojs/v1/admin/queues?per_page=1", &list), http.StatusOK)
	if !list.Pagination.HasMore || len(list.Items) != 1 {
		t.Errorf("per_page=1: %+v", list.Pagination)
	}
	for _, bad := range []string{"page=0", "per_page=101", "per_page=x", "limit=5"} {
		r := w.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/queues?" + bad, key: readKey})
		wantError(t, bad, r, http.StatusBadRequest, "invalid_request", cutEq(bad))
	}

	w.send(t, http.MethodPost, "/ojs/v1/admin/queues/emails/pause", nil, nil)
	var one struct {
		adminQueue
		Configuration struct {
			State        string         `json:"state"`
			Backpressure map[string]any `json:"backpressure"`
		}
	}
	wantStatus(t, w.get(t, "/ojs/v1/admin/queues/emails", &one), http.StatusOK)
	if one.Name != "emails" || one.State != "paused" || !one.Paused || one.Counts.Active != 1 || one.Configuration.State != "paused" ||
		one.Configuration.Backpressure["max_depth"] != 0.0 {
		t.Errorf("emails: %+v", one)
	}
	wantError(t, "unknown queue", w.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/queues/nothing.here", key: readKey}),
		http.StatusNotFound, "not_found", "")

	var stats struct {
		Queue  string
		Status string
		Stats  struct {
			jobCounts
			Queue             string
			CompletedLastHour int64 `json:"completed_last_hour"`
			FailedLastHour    int64 `json:"failed_last_hour"`
			Depth             int64
			MaxDepth          *int64 `json:"max_depth"`
		}
		ComputedAt string `json:"computed_at"`
	}
	wantStatus(t, w.get(t, "/ojs/v1/queues/orders/stats", &stats), http.StatusOK)
	if stats.Queue != "orders" || stats.Status != "active" || stats.Stats.Queue != "orders" || stats.Stats.Depth != 3 ||
		stats.Stats.jobCounts != orders.Counts || stats.Stats.CompletedLastHour != 3 || stats.Stats.FailedLastHour != 11 ||
		stats.Stats.MaxDepth != nil || stats.ComputedAt == "" {
		t.Errorf("orders stats %+v", stats)
	}
	wantStatus(t, w.get(t, "/ojs/v1/queues/emails/stats", &stats), http.StatusOK)
	if stats.Status != "paused" || stats.Stats.Active != 1 || stats.Stats.Scheduled != 1 || stats.Stats.Available != 1 || stats.Stats.Depth != 2 {
		t.Errorf("emails stats %+v", stats)
	}
	wantError(t, "stats of an unknown queue", w.do(t, req{method: http.MethodGet, path: "/ojs/v1/queues/nothing.here/stats", key: readKey}),
		http.StatusNotFound, "not_found", "")
}

// cutEq is the parameter of a query "name=value".
func cutEq(q string) string {
	name, _, _ := strings.Cut(q, "=")
	return name
}

// GET /admin/jobs pages through the jobs, newest first, filtered by OJS
// state, queue and type (admin spec §7.1, ADM-003); GET /admin/jobs/{id}
// is the job's whole envelope (§7.2, ADM-004).
func TestAdminJobsListByStateAndDetail(t *testing.T) {
	w := setupWorkers(t)
	s := seedAdmin(t, w)
	list := func(query string) ([]adminJob, adminPagination) {
		t.Helper()
		var out struct {
			Items      []adminJob
			Pagination adminPagination
		}
		wantStatus(t, w.get(t, "/ojs/v1/admin/jobs?"+query, &out), http.StatusOK)
		return out.Items, out.Pagination
	}
	ids := func(js []adminJob) []string {
		var out []string
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"state=active", []string{s.active}},
		{"state=scheduled", []string{s.scheduled}},
		{"state=available&queue=emails", []string{s.waiting}},
		// A job published over HTTP has an id of the app's clock, pinned
		// before the records were seeded, maybe in the same millisecond:
		// their order is not known.
		{"state=available", []string{s.orders[2], s.waiting}},
		{"state=cancelled", []string{s.cancelled}},
		{"state=discarded", []string{s.orders[9], s.orders[8], s.orders[7], s.orders[6]}},
		{"state=retryable&order=asc", []string{s.orders[0], s.orders[1]}},
		{"state=completed&queue=emails", nil},
		{"type=email.*&state=active", []string{s.active}},
		{"type=email.send&queue=emails&state=scheduled", []string{s.scheduled}},
	} {
		got, pg := list(tt.query)
		gotIDs := ids(got)
		if tt.query == "state=available" && len(gotIDs) == 2 && gotIDs[0] == s.waiting {
			slices.Reverse(gotIDs)
		}
		if !slices.Equal(gotIDs, tt.want) || pg.Total != int64(len(tt.want)) || pg.HasMore {
			t.Errorf("%s: %v (%+v), want %v", tt.query, gotIDs, pg, tt.want)
		}
		for _, j := range got {
			if st := stateOf(tt.query); st != "" && j.State != st {
				t.Errorf("%s: job %s is %s", tt.query, j.ID, j.State)
			}
		}
	}
	got, pg := list("state=discarded&per_page=3&page=2")
	if !slices.Equal(ids(got), []string{s.orders[6]}) || pg != (adminPagination{Total: 4, Page: 2, PerPage: 3}) {
		t.Errorf("page 2 of the dead letters: %v %+v", ids(got), pg)
	}
	got, pg = list("state=discarded&per_page=3")
	if len(got) != 3 || pg != (adminPagination{Total: 4, Page: 1, PerPage: 3, HasMore: true}) {
		t.Errorf("page 1 of the dead letters: %v %+v", ids(got), pg)
	}
	if got, _ := list("state=scheduled"); got[0].ScheduledAt == nil {
		t.Errorf("a scheduled job shows no scheduled_at: %+v", got[0])
	}
	for _, bad := range []string{"state=dead", "sort=priority", "order=up", "type=a*b*", "page=0", "since=yesterday", "color=red"} {
		r := w.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/jobs?" + bad, key: readKey})
		wantError(t, bad, r, http.StatusBadRequest, "invalid_request", cutEq(bad))
	}

	// The whole envelope, as GET /jobs/{id} has it under job.
	var env, plain struct {
		ID, Type, Queue, State string
		Args                   any
		Lease                  *struct {
			WorkerID string `json:"worker_id"`
		}
	}
	wantStatus(t, w.get(t, "/ojs/v1/admin/jobs/"+s.active, &env), http.StatusOK)
	if env.ID != s.active || env.Type != "email.send" || env.Queue != "emails" || env.State != "active" || !reflect.DeepEqual(env.Args, []any{1.0}) ||
		env.Lease == nil || env.Lease.WorkerID != "w-1" {
		t.Errorf("admin job %+v", env)
	}
	for _, id := range []string{s.active, s.scheduled, s.cancelled} {
		var admin map[string]any
		var data struct{ Job map[string]any }
		wantStatus(t, w.get(t, "/ojs/v1/admin/jobs/"+id, &admin), http.StatusOK)
		wantStatus(t, w.get(t, "/ojs/v1/jobs/"+id, &data), http.StatusOK)
		if !reflect.DeepEqual(admin, data.Job) {
			t.Errorf("admin job %s differs from GET /jobs/{id}'s job:\n%v\n%v", id, admin, data.Job)
		}
	}
	wantStatus(t, w.get(t, "/ojs/v1/admin/jobs/"+s.cancelled, &plain), http.StatusOK)
	if plain.ID != s.cancelled || plain.Queue != "orders" || plain.State != "cancelled" {
		t.Errorf("admin job of a record read from Kafka: %+v", plain)
	}
	wantError(t, "unknown job", w.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/jobs/019503e1-7b2a-7000-8000-000000000001", key: readKey}),
		http.StatusNotFound, "not_found", "")
	wantError(t, "not an id", w.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/jobs/nope", key: readKey}),
		http.StatusBadRequest, "invalid_request", "id")
}

// stateOf is the state a query asks for ("" for none).
func stateOf(q string) string {
	v, _ := url.ParseQuery(q)
	return v.Get("state")
}

// A bulk retry runs only with "confirm": true: absent or false is a 400
// naming confirm (admin spec §4 "Safe by default", §8.1; EXT-ADM-006).
// Confirmed, it is the bulk retry of POST /dead-letter/retry: a task, whose
// filter maps the OJS state (discarded, cancelled, retryable) onto the
// record filter's.
func TestAdminBulkRetryNeedsConfirm(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, rec{}, rec{}, rec{queue: "billing"}, rec{exhaustion: dlq.ExhaustionCancelled})
	for name, body := range map[string]map[string]any{
		"confirm false":  {"filter": map[string]any{"state": "discarded"}, "confirm": false},
		"confirm absent": {"filter": map[string]any{"state": "discarded"}},
	} {
		wantError(t, name, b.send(t, http.MethodPost, "/ojs/v1/admin/jobs/bulk/retry", body, nil), http.StatusBadRequest, "invalid_request", "confirm")
	}
	for name, tt := range map[string]struct {
		filter map[string]any
		field  string
	}{
		"no state":         {map[string]any{"queue": "orders"}, "filter.state"},
		"state available":  {map[string]any{"state": "available"}, "filter.state"},
		"state completed":  {map[string]any{"state": "completed"}, "filter.state"},
		"unknown key":      {map[string]any{"state": "discarded", "colour": "red"}, "filter.colour"},
		"exhaustion alone": {map[string]any{"state": "retryable", "exhaustion": "discard"}, "filter.exhaustion"},
	} {
		wantError(t, name, b.send(t, http.MethodPost, "/ojs/v1/admin/jobs/bulk/retry", map[string]any{"filter": tt.filter, "confirm": true}, nil),
			http.StatusBadRequest, "invalid_request", tt.field)
	}
	if n := b.count(t, "state <> 'discarded'"); n != 0 {
		t.Fatalf("%d records retried by refused calls", n)
	}

	var a struct {
		Action  string
		Matched int64
		Filter  map[string]any
		Task    taskJSON
	}
	r := b.send(t, http.MethodPost, "/ojs/v1/admin/jobs/bulk/retry",
		map[string]any{"filter": map[string]any{"state": "cancelled", "queue": "orders"}, "confirm": true}, &a)
	wantStatus(t, r, http.StatusAccepted)
	if a.Action != "retry" || a.Matched != 1 || a.Filter["exhaustion"] != "cancelled" || a.Filter["state"] != "discarded" ||
		r.header.Get("Location") != "/ojs/v1/tasks/"+a.Task.ID {
		t.Fatalf("answer %+v, Location %q", a, r.header.Get("Location"))
	}
	b.waitTask(t, a.Task.ID, "completed", 30*time.Second)
	// Retried, a record is available, then redelivered (completed).
	if n := b.count(t, "state <> 'discarded' AND id = $1", ids[3]); n != 1 || b.count(t, "state = 'discarded'") != 3 {
		t.Fatalf("the cancelled job is not the one retried")
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/admin/jobs/bulk/retry",
		map[string]any{"filter": map[string]any{"state": "discarded", "queue": "orders"}, "confirm": true}, &a), http.StatusAccepted)
	b.waitTask(t, a.Task.ID, "completed", 30*time.Second)
	if a.Matched != 2 || b.count(t, "state = 'discarded' AND queue = 'orders'") != 0 || b.count(t, "queue = 'billing' AND state = 'discarded'") != 1 {
		t.Fatalf("retry of orders' discarded jobs: %+v", a)
	}
	// Audited as the bulk retry it is: the refused calls with their
	// status, the two tasks with their filter and count.
	var done []auditItem
	for _, e := range b.audit(t, "dead_letter.bulk_retry") {
		if e.Status == http.StatusAccepted {
			done = append(done, e)
		}
	}
	if len(done) != 2 || done[0].Filter["exhaustion"] != "cancelled" || done[0].Count == nil || *done[0].Count != 1 ||
		done[1].Target != "task:"+a.Task.ID {
		t.Fatalf("audit entries of the admin bulk retries: %+v", done)
	}
}

// A caller whose roles read payments.* alone counts, lists and reads the
// jobs of those queues only; a job of another queue is not found.
func TestAdminNarrowsToTheCallersQueues(t *testing.T) {
	b, is := startOIDC(t)
	ids := b.seed(t, rec{queue: "payments.card"}, rec{queue: "payments.card", state: dlq.StateRetryable},
		rec{queue: "orders"}, rec{queue: "orders"}, rec{queue: "orders"})
	ann := is.UserToken(idptest.User{Subject: "u-ann", Email: "ann@example.com", Groups: []string{"payments"}})
	var st struct {
		Queues int64
		Jobs   jobCounts
	}
	b.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/stats", key: ann}).json(t, &st)
	if st.Queues != 1 || st.Jobs != (jobCounts{Discarded: 1, Retryable: 1}) {
		t.Errorf("stats of ann %+v", st)
	}
	var qs struct {
		Items      []adminQueue
		Pagination adminPagination
	}
	b.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/queues", key: ann}).json(t, &qs)
	if len(qs.Items) != 1 || qs.Items[0].Name != "payments.card" || qs.Pagination.Total != 1 {
		t.Errorf("queues of ann %+v", qs)
	}
	var js struct{ Items []adminJob }
	b.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/jobs", key: ann}).json(t, &js)
	if len(js.Items) != 2 {
		t.Errorf("jobs of ann %+v", js)
	}
	wantStatus(t, b.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/jobs/" + ids[0], key: ann}), http.StatusOK)
	wantError(t, "a job of orders", b.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/jobs/" + ids[2], key: ann}),
		http.StatusNotFound, "not_found", "")
	wantError(t, "orders' stats", b.do(t, req{method: http.MethodGet, path: "/ojs/v1/queues/orders/stats", key: ann}),
		http.StatusNotFound, "not_found", "")
}
