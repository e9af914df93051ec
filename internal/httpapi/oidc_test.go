package httpapi_test

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/idptest"
	"github.com/redrive/redrive/internal/testdate"
)

// rolesFile gives group payments read, retry and purge on payments.*, and
// group sre admin everywhere.
const rolesFile = `roles:
  payments-operator:
    actions: [read, retry, purge]
    queues: ["payments.*"]
  admin:
    actions: [admin]
    queues: ["*"]
  payments-admin:
    actions: [admin]
    queues: ["payments.*"]
members:
  - {group: payments, roles: [payments-operator]}
  - {group: sre, roles: [admin]}
  - {group: payments-leads, roles: [payments-admin]}
`

// startOIDC starts a server that takes tokens of a test identity provider
// beside its API keys.
func startOIDC(t *testing.T) (*bundle, *idptest.Issuer) {
	t.Helper()
	t.Parallel()
	is := idptest.New(t, "redrive")
	roles := filepath.Join(t.TempDir(), "roles.yaml")
	writeFile(t, roles, rolesFile)
	b := start(t, options{env: map[string]string{"REDRIVE_OIDC_ISSUER": is.URL, "REDRIVE_OIDC_CLIENT_ID": "redrive",
		"REDRIVE_ROLES_FILE": roles}})
	return b, is
}

// A person of group payments sees the payments.* queues only — records,
// totals, statistics, incidents, queues, activity, events — gets 404 for
// a record of another queue and 403 retrying one of orders' records
// in bulk or alone is impossible; bulk operations count and touch only
// payments.* records. An admin sees everything; API keys keep working.
func TestOIDCGroupSeesItsQueuesOnly(t *testing.T) {
	b, is := startOIDC(t)
	ids := b.seed(t,
		rec{queue: "payments.card", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, errType: "card.declined", value: `{"n":1}`},
		rec{queue: "payments.card", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, errType: "card.declined", value: `{"n":2}`},
		rec{queue: "payments.wallet", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, errType: "wallet.timeout", value: `{"n":3}`},
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, errType: "card.declined", value: `{"n":4}`},
		rec{queue: "paymentsXcard", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, errType: "card.declined", value: `{"n":5}`},
	)
	ann := is.UserToken(idptest.User{Subject: "u-ann", Email: "ann@example.com", Groups: []string{"payments", "everyone"}})
	root := is.UserToken(idptest.User{Subject: "u-root", Email: "root@example.com", Groups: []string{"sre"}})

	var who struct {
		Kind, Name string
		Email      *string
		Roles      []string
		Scope      string
		Grants     []struct {
			Role    string
			Actions []string
			Queues  []string
		}
	}
	wantStatus(t, b.do(t, req{method: "GET", path: "/ojs/v1/whoami", key: ann}), 200)
	b.do(t, req{method: "GET", path: "/ojs/v1/whoami", key: ann}).json(t, &who)
	if who.Kind != "oidc" || who.Name != "u-ann" || who.Email == nil || *who.Email != "ann@example.com" ||
		!slices.Equal(who.Roles, []string{"payments-operator"}) || who.Scope != "write" ||
		len(who.Grants) != 1 || !slices.Equal(who.Grants[0].Queues, []string{"payments.*"}) {
		t.Errorf("whoami = %+v", who)
	}

	var list listJSON
	r := b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: ann})
	wantStatus(t, r, 200)
	r.json(t, &list)
	got := list.itemIDs()
	slices.Sort(got)
	want := []string{ids[0], ids[1], ids[2]}
	slices.Sort(want)
	if !slices.Equal(got, want) || list.Pagination.Total != 3 {
		t.Errorf("ann lists %v (total %d), want the three payments.* records %v", got, list.Pagination.Total, want)
	}
	// Asking for another queue finds nothing rather than another team's records.
	r = b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter?queue=orders", key: ann})
	r.json(t, &list)
	if len(list.Items) != 0 || list.Pagination.Total != 0 {
		t.Errorf("ann lists %d records of orders (total %d)", len(list.Items), list.Pagination.Total)
	}

	var stats struct {
		Total   int64            `json:"total"`
		ByQueue map[string]int64 `json:"by_queue"`
	}
	b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter/stats", key: ann}).json(t, &stats)
	if stats.Total != 3 || len(stats.ByQueue) != 2 || stats.ByQueue["payments.card"] != 2 {
		t.Errorf("ann's stats = %+v, want 3 records in payments.card and payments.wallet", stats)
	}
	var incidents struct {
		Items []struct {
			ID     string   `json:"id"`
			Count  int64    `json:"count"`
			Queues []string `json:"queues"`
		} `json:"items"`
	}
	// Seeded records get their incidents from a background pass, which a
	// -race run may not have made yet: an empty list proves nothing here
	// (the store tests check the incident queries' queue restriction).
	b.do(t, req{method: "GET", path: "/ojs/v1/incidents", key: ann}).json(t, &incidents)
	if len(incidents.Items) == 0 {
		t.Log("no incident listed yet; the queue restriction of incidents is not checked by this run")
	}
	for _, in := range incidents.Items {
		for _, q := range in.Queues {
			if !strings.HasPrefix(q, "payments.") {
				t.Errorf("ann sees incident %s with queue %s", in.ID, q)
			}
		}
	}

	var queues struct {
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
	}
	b.do(t, req{method: "GET", path: "/ojs/v1/queues", key: ann}).json(t, &queues)
	for _, q := range queues.Items {
		if !strings.HasPrefix(q.Name, "payments.") {
			t.Errorf("ann's queue list holds %s", q.Name)
		}
	}

	// One record of orders: not found (its existence does not leak), and
	// not retried; the same for a queue ann may read but not configure.
	wantError(t, "ann reads an orders record", b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter/" + ids[3], key: ann}), 404, "not_found", "")
	wantError(t, "ann retries an orders record", b.do(t, req{method: "POST", path: "/ojs/v1/dead-letter/" + ids[3] + "/retry", key: ann}), 404, "not_found", "")
	wantStatus(t, b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter/" + ids[0], key: ann}), 200)
	r = b.do(t, req{method: "POST", path: "/ojs/v1/queues/payments.card/pause", key: ann})
	wantError(t, "ann pauses payments.card", r, 403, "forbidden", "")
	if e := r.err(t); e.Error.Details["required_action"] != "configure" {
		t.Errorf("403 details = %v", e.Error.Details)
	}
	wantError(t, "ann reads the audit log", b.do(t, req{method: "GET", path: "/ojs/v1/audit", key: ann}), 403, "forbidden", "")

	// Bulk retry of orders: 403 is for a single record; in bulk, a filter
	// naming orders counts nothing, and no filter counts payments.* only.
	var dry struct {
		WouldAffect int64 `json:"would_affect"`
	}
	b.do(t, req{method: "POST", path: "/ojs/v1/dead-letter/retry", key: ann, body: map[string]any{"filter": map[string]any{"queue": "orders"}}}).json(t, &dry)
	if dry.WouldAffect != 0 {
		t.Errorf("ann's bulk retry of orders would affect %d records", dry.WouldAffect)
	}
	var task struct {
		WouldAffect int64 `json:"would_affect"`
		Task        struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	r = b.do(t, req{method: "DELETE", path: "/ojs/v1/dead-letter", key: ann, body: map[string]any{"filter": map[string]any{"state": "discarded"}, "confirm": true}})
	r.json(t, &task)
	if task.WouldAffect != 3 {
		t.Errorf("ann's purge of every discarded record counts %d, want 3 (payments.* only): %s", task.WouldAffect, r.body)
	}
	eventually.True(t, "ann's purge removes every payments.* record", func() bool {
		return b.count(t, "queue LIKE 'payments.%'") == 0
	}, eventually.Within(15*time.Second))
	if n := b.count(t, "queue IN ('orders', 'paymentsXcard')"); n != 2 {
		t.Errorf("ann's purge touched other queues: %d of 2 records left", n)
	}

	// The admin, and an API key, see everything.
	b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: root}).json(t, &list)
	if list.Pagination.Total != 2 {
		t.Errorf("the admin lists %d records, want the 2 left", list.Pagination.Total)
	}
	b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: readKey}).json(t, &list)
	if list.Pagination.Total != 2 {
		t.Errorf("the read key lists %d records, want 2", list.Pagination.Total)
	}

	// The audit log names the person: subject and email.
	var audit struct {
		Items []struct {
			Action  string `json:"action"`
			KeyName string `json:"key_name"`
			Actor   struct {
				Kind    string  `json:"kind"`
				Subject *string `json:"subject"`
				Email   *string `json:"email"`
			} `json:"actor"`
		} `json:"items"`
	}
	b.do(t, req{method: "GET", path: "/ojs/v1/audit?action=dead_letter.purge", key: root}).json(t, &audit)
	if len(audit.Items) == 0 || audit.Items[0].Actor.Kind != "oidc" || audit.Items[0].Actor.Subject == nil ||
		*audit.Items[0].Actor.Subject != "u-ann" || audit.Items[0].Actor.Email == nil || *audit.Items[0].Actor.Email != "ann@example.com" ||
		audit.Items[0].KeyName != "ann@example.com" {
		t.Errorf("audit of ann's purge = %+v", audit.Items)
	}
}

// A retry of a record of a queue the person may read but not retry is 403.
func TestOIDCRetryNeedsTheRetryAction(t *testing.T) {
	b, is := startOIDC(t)
	ids := b.seed(t, rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, value: `{}`})
	viewer := is.UserToken(idptest.User{Subject: "u-view", Groups: []string{"payments"}})
	// payments may not read orders: 404; the admin group retries it.
	wantError(t, "payments retries orders", b.do(t, req{method: "POST", path: "/ojs/v1/dead-letter/" + ids[0] + "/retry", key: viewer}), 404, "not_found", "")
	// Nor send one of its own records into orders: that is a retry there too.
	own := b.seed(t, rec{queue: "payments.card", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, value: `{}`})
	into := func(q string) req {
		return req{method: "POST", path: "/ojs/v1/dead-letter/" + own[0] + "/retry", key: viewer, body: map[string]any{"override": map[string]any{"queue": q}}}
	}
	r := b.do(t, into("orders"))
	wantError(t, "payments redelivers into orders", r, 403, "forbidden", "")
	if e := r.err(t); e.Error.Details["required_action"] != "retry" || e.Error.Details["queue"] != "orders" {
		t.Errorf("403 details = %v", e.Error.Details)
	}
	wantStatus(t, b.do(t, into("payments.wallet")), 200)
	// Replay rules: a person limited to payments.* sees the rules of its
	// queues only, and may not create one (configure on every queue).
	root := is.UserToken(idptest.User{Subject: "u-root", Groups: []string{"sre"}})
	for _, q := range []string{"orders", "payments.card"} {
		rule := map[string]any{"name": "nightly-" + q, "filter": map[string]any{"queue": q}, "delay": "PT1H", "max_replays": 1}
		wantStatus(t, b.do(t, req{method: "POST", path: "/ojs/v1/dead-letter/replay-rules", key: root, body: rule}), 201)
	}
	var rules struct {
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
	}
	b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter/replay-rules", key: viewer}).json(t, &rules)
	if len(rules.Items) != 1 || rules.Items[0].Name != "nightly-payments.card" {
		t.Errorf("payments lists replay rules %+v, want nightly-payments.card alone", rules.Items)
	}
	wantError(t, "payments reads the orders rule", b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter/replay-rules/nightly-orders", key: viewer}), 404, "not_found", "")
	wantError(t, "payments creates a rule", b.do(t, req{method: "POST", path: "/ojs/v1/dead-letter/replay-rules", key: viewer,
		body: map[string]any{"name": "mine", "filter": map[string]any{"queue": "payments.card"}, "delay": "PT1H", "max_replays": 1}}), 403, "forbidden", "")

	nobody := is.UserToken(idptest.User{Subject: "u-none", Groups: []string{"interns"}})
	r = b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: nobody})
	wantError(t, "a person in no role lists records", r, 403, "forbidden", "")
	wantStatus(t, b.do(t, req{method: "GET", path: "/ojs/v1/whoami", key: nobody}), 200)
}

// Tokens are refused when expired, of another issuer, of another audience,
// or signed by a key the issuer does not publish; a token signed with the
// issuer's new key after a rotation is accepted.
func TestOIDCTokensAreChecked(t *testing.T) {
	b, is := startOIDC(t)
	user := map[string]any{"sub": "u-root", "groups": []string{"sre"}}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range user {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	wantStatus(t, b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: is.Token(user)}), 200)

	expired := is.Token(with(map[string]any{"exp": testdate.Now().Add(-time.Minute).Unix(), "iat": testdate.Now().Add(-time.Hour).Unix()}))
	r := b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: expired})
	wantError(t, "an expired token", r, 401, "unauthorized", "")
	if msg := r.err(t).Error.Message; !strings.Contains(msg, "expired") {
		t.Errorf("expired token message = %q", msg)
	}
	foreign := is.Token(with(map[string]any{"iss": "https://idp.elsewhere.example"}))
	wantError(t, "a token of another issuer", b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: foreign}), 401, "unauthorized", "")
	otherAud := is.Token(with(map[string]any{"aud": "another-app"}))
	wantError(t, "a token for another audience", b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: otherAud}), 401, "unauthorized", "")
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forged := idptest.Sign(k, "test-key-1", with(map[string]any{"iss": is.URL, "aud": "redrive", "exp": testdate.Now().Add(time.Hour).Unix()}))
	wantError(t, "a token signed by another key", b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: forged}), 401, "unauthorized", "")

	// Key rotation: the issuer publishes a new key; a token signed with it
	// is accepted (an unknown kid makes the key set be fetched again),
	// and one signed with the retired key no longer is.
	old := is.Token(user)
	is.Rotate()
	wantStatus(t, b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: is.Token(user)}), 200)
	wantError(t, "a token of the retired key", b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: old}), 401, "unauthorized", "")
	// Forged tokens with made-up key ids do not make each request fetch the
	// issuer's key set: the set is fetched again a few times, then once every 10 s, whatever the ids.
	before := is.Fetches()
	for i := range 40 {
		made := idptest.Sign(k, fmt.Sprintf("made-up-%d", i), with(map[string]any{"iss": is.URL, "aud": "redrive", "exp": testdate.Now().Add(time.Hour).Unix()}))
		wantError(t, "a token of a made-up key id", b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: made}), 401, "unauthorized", "")
	}
	if n := is.Fetches() - before; n > 3 {
		t.Errorf("40 tokens of made-up key ids fetched the key set %d times, want at most 3", n)
	}

	// API keys keep working beside tokens.
	wantStatus(t, b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: readKey}), 200)
	h := http.Header{}
	h.Set("X-API-Key", writeKey)
	wantStatus(t, b.do(t, req{method: "GET", path: "/ojs/v1/whoami", header: h}), 200)
}

// An import needs admin on the queue of every record it holds: a person who
// is admin of payments.* only may import payments' records, and an import
// that holds one record of orders is refused whole, naming the line.
func TestOIDCImportNeedsAdminOnEachQueue(t *testing.T) {
	b, is := startOIDC(t)
	b.seed(t,
		rec{queue: "payments.card", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, value: `{"n":1}`},
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, value: `{"n":2}`})
	lines := func(query string) []byte {
		t.Helper()
		r := b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter/export?" + query, key: writeKey})
		wantStatus(t, r, 200)
		return r.body
	}
	lead := is.UserToken(idptest.User{Subject: "u-lead", Groups: []string{"payments-leads"}})
	imp := func(body []byte) resp {
		return b.do(t, req{method: "POST", path: "/ojs/v1/dead-letter/import", key: lead, body: body, rawBody: true,
			header: http.Header{"Content-Type": {"application/x-ndjson"}}})
	}
	r := imp(lines("state=discarded"))
	wantError(t, "a payments admin imports a record of orders", r, 403, "forbidden", "")
	if e := r.err(t); e.Error.Details["field"] != "queue" {
		t.Errorf("403 details %v, want the queue field named", e.Error.Details)
	}
	var res struct{ Imported, Skipped int }
	r = imp(lines("queue=payments.card"))
	wantStatus(t, r, 200)
	r.json(t, &res)
	if res.Imported != 0 || res.Skipped != 1 {
		t.Errorf("import of payments' record into its own server: %+v, want it skipped as stored", res)
	}
	payments := is.UserToken(idptest.User{Subject: "u-pay", Groups: []string{"payments"}})
	wantError(t, "an operator (no admin) imports", b.do(t, req{method: "POST", path: "/ojs/v1/dead-letter/import", key: payments,
		body: lines("queue=payments.card"), rawBody: true, header: http.Header{"Content-Type": {"application/x-ndjson"}}}), 403, "forbidden", "")
}
