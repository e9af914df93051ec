package template

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/redrive/redrive/internal/fingerprint"
)

func newMiner(t testing.TB, cfg Config) *Miner {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func add(m *Miner, group, msg string) (Template, bool) {
	return m.Add(group, Tokenize(msg))
}

func TestAddGeneralizesAndKeepsTheID(t *testing.T) {
	m := newMiner(t, Config{})
	first, changed := add(m, "q\x00E", "lock held by worker-alpha on shard eu.west")
	if !changed || first.Count != 1 || first.Seq != 1 || len(first.ID) != 16 {
		t.Fatalf("first: %+v changed %v, want a new template", first, changed)
	}
	second, changed := add(m, "q\x00E", "lock held by worker-beta on shard eu.west")
	if second.ID != first.ID || !changed || second.Count != 2 {
		t.Fatalf("second: %+v changed %v, want template %s generalized", second, changed, first.ID)
	}
	if got := strings.Join(second.Tokens, " "); got != "lock held by <*> on shard eu.west" {
		t.Errorf("tokens %q", got)
	}
	third, changed := add(m, "q\x00E", "lock held by worker-gamma on shard eu.west")
	if third.ID != first.ID || changed || third.Count != 3 {
		t.Errorf("third: %+v changed %v, want the same template unchanged", third, changed)
	}
	// The same messages in another group make other templates.
	other, _ := add(m, "q\x00F", "lock held by worker-alpha on shard eu.west")
	if other.ID == first.ID {
		t.Errorf("group F reused group E's template %s", first.ID)
	}
}

// What tells problems apart keeps messages apart; names and ids do not.
func TestWhatSeparatesProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		same bool
	}{
		{"a dotted name varies", "cannot reach shard eu.west", "cannot reach shard us.east", true},
		{"an id varies", "charge <uuid> failed for customer cus_<id>", "charge <uuid> failed for customer acct-<n>", true},
		{"a character varies", "Unexpected token < in JSON at position <n>", "Unexpected token u in JSON at position <n>", true},
		{"a snake_case name varies", "cannot load settings for tenant acme_eu", "cannot load settings for tenant acme_us", true},
		{"sentence words", "Cannot read properties of undefined (reading <str>)", "Cannot read properties of null (reading <str>)", false},
		{"upper-case codes", "request to https://<host>/v<n>/hooks failed, reason: connect ECONNREFUSED <ip>:<port>",
			"request to https://<host>/v<n>/hooks failed, reason: connect ETIMEDOUT <ip>:<port>", false},
		{"reason phrases", "Response status code does not indicate success: <n> (Forbidden)", "Response status code does not indicate success: <n> (Conflict)", false},
		{"underscored codes", "KafkaError{code=_MSG_TIMED_OUT,val=<n>,str=<str>}", "KafkaError{code=_TRANSPORT,val=<n>,str=<str>}", false},
		{"enum values are words too", "Order <uuid> cannot transition from SHIPPED to PAID", "Order <uuid> cannot transition from DELIVERED to PAID", false},
		{"status codes", "Request failed with status code 503", "Request failed with status code 502", false},
		{"SQLSTATEs", "update failed (SQLSTATE 40P01)", "update failed (SQLSTATE 57014)", false},
		{"quoted names", `duplicate key value violates unique constraint "orders_pkey"`, `duplicate key value violates unique constraint "orders_email_key"`, false},
		{"CamelCase codes", "status TooManyRequests for activity <uuid>", "status NotFound for activity <uuid>", false},
		{"two words", "Request req_<id>: Your card was declined", "Request req_<id>: Your card has expired", false},
		{"lengths", "connection refused", "connection refused by peer", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMiner(t, Config{})
			a, _ := add(m, "g", tc.a)
			b, _ := add(m, "g", tc.b)
			if (a.ID == b.ID) != tc.same {
				t.Errorf("%q and %q: same template %v, want %v (%v)", tc.a, tc.b, a.ID == b.ID, tc.same, b.Tokens)
			}
		})
	}
}

// A variable first token descends through the wildcard child, so it does
// not split the template.
func TestVariableLeadingTokens(t *testing.T) {
	m := newMiner(t, Config{})
	a, _ := add(m, "g", "x<n>k<n>p-<hex> failed to start: image pull backoff")
	b, _ := add(m, "g", "<n>f<n>c<n>-<hex> failed to start: image pull backoff")
	if a.ID != b.ID {
		t.Errorf("leading ids split the template: %v / %v", a.Tokens, b.Tokens)
	}
}

func TestDeterministic(t *testing.T) {
	msgs := []string{"a b c", "a b d", "x y z", "a q d", "connection refused", "connection refused by <ip>:<port>"}
	var runs [2][]string
	for r := range runs {
		m := newMiner(t, Config{})
		for _, msg := range msgs {
			tpl, _ := add(m, "g", msg)
			runs[r] = append(runs[r], tpl.ID+" "+strings.Join(tpl.Tokens, " "))
		}
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Errorf("two runs differ:\n%v\n%v", runs[0], runs[1])
	}
}

// IDs stay unique within a group even when the hash of a first message
// collides with a template's ID.
func TestIDsAreUniqueInAGroup(t *testing.T) {
	m := newMiner(t, Config{})
	a, _ := m.Add("g", []string{"connection", "refused"})
	g := m.groups["g"]
	if id := uniqueID(g, []string{"connection", "refused"}); id == a.ID || len(id) != 16 {
		t.Errorf("uniqueID gave %q for a taken hash (%s)", id, a.ID)
	}
	if g.ids[overflowID("g")] != true {
		t.Error("the overflow ID is not reserved")
	}
}

func TestLimits(t *testing.T) {
	t.Run("MaxTemplates", func(t *testing.T) {
		m := newMiner(t, Config{MaxTemplates: 2})
		var ids []string
		for _, msg := range []string{"alpha", "beta", "gamma", "delta"} {
			tpl, _ := add(m, "g", msg)
			ids = append(ids, tpl.ID)
		}
		tpl, changed := add(m, "g", "epsilon")
		if !tpl.Overflow || changed || tpl.Count != 3 || ids[2] != tpl.ID || ids[3] != tpl.ID {
			t.Errorf("past MaxTemplates: %+v changed %v, ids %v", tpl, changed, ids)
		}
		if s := m.Stats(); s.Templates != 2 || s.Overflowed != 3 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("MaxChildren bounds a leaf", func(t *testing.T) {
		m := newMiner(t, Config{MaxChildren: 2})
		for _, w := range []string{"alpha", "beta", "gamma"} {
			tpl, _ := m.Add("g", []string{"x", "y", "z", w + " " + w, "7" + w}) // one leaf, never similar
			if w == "gamma" && !tpl.Overflow {
				t.Errorf("third template in a leaf of 2: %+v", tpl)
			}
		}
	})
	t.Run("MaxTokens and MaxTokenBytes", func(t *testing.T) {
		m := newMiner(t, Config{MaxTokens: 3, MaxTokenBytes: 8})
		tpl, _ := m.Add("g", []string{"a", "ééééé", "\xff\xfe\x00", "d"})
		want := []string{"a", "éééé", "\uFFFD\uFFFD"} // é is 2 bytes; the third cut at 8
		if !slices.Equal(tpl.Tokens, want) {
			t.Errorf("tokens %q, want %q", tpl.Tokens, want)
		}
		for _, tok := range tpl.Tokens {
			if !utf8.ValidString(tok) || len(tok) > 8 {
				t.Errorf("token %q", tok)
			}
		}
	})
	t.Run("MaxBytes", func(t *testing.T) {
		m := newMiner(t, Config{MaxBytes: 4096})
		var last Template
		for i := range 100 {
			last, _ = m.Add(fmt.Sprintf("group-%d", i), []string{"message", fmt.Sprint(i)})
		}
		s := m.Stats()
		if s.Bytes > 4096 || !last.Overflow || last.Count != 0 || s.Overflowed == 0 {
			t.Errorf("stats %+v, last %+v", s, last)
		}
	})
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{SimilarityThreshold: 1.5}, "SimilarityThreshold"},
		{Config{SimilarityThreshold: -0.1}, "SimilarityThreshold"},
		{Config{MaxDepth: 1}, "MaxDepth"},
		{Config{MaxChildren: 1}, "MaxChildren"},
		{Config{MaxTemplates: -1}, "MaxTemplates"},
		{Config{MaxTokens: MaxTokensLimit + 1}, "MaxTokens"},
		{Config{MaxTokenBytes: 4}, "MaxTokenBytes"},
		{Config{MaxBytes: 100}, "MaxBytes"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.HasPrefix(err.Error(), "template: "+tc.field+":") {
			t.Errorf("New(%+v): %v, want an error naming %s", tc.cfg, err, tc.field)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	m := newMiner(t, Config{})
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				add(m, fmt.Sprint("g", i%3), fingerprint.Normalize(fmt.Sprintf("worker-%d lost lease on shard-%d", w, i)))
				if i%50 == 0 {
					m.Snapshot()
					m.Stats()
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	if s := m.Stats(); s.Templates != 3 {
		t.Errorf("%d templates, want one per group: %+v", s.Templates, m.Snapshot())
	}
}
